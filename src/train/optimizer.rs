//! SGD with momentum (Nesterov's too), Adam and AdamW as PyTorch computes them, weight decay
//! included, with their state in the open, by parameter name. burn's optimizers keep their state private and read it back only
//! synchronously, which WebGPU cannot do; a checkpoint taken while training on a GPU has to read
//! it.

use std::collections::BTreeMap;

use burn::module::{Module, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;

use crate::config::{Freeze, OptimizerKind, ScheduleKind, TrainConfig};
use crate::model::{MapNamed, channels_last_memory, map_named};

/// PyTorch's Adam defaults.
pub const ADAM_BETAS: (f64, f64) = (0.9, 0.999);
const ADAM_EPSILON: f64 = 1e-8;

/// What the optimizer keeps for one parameter: SGD's momentum buffer, or Adam's first and second
/// moments, each in its parameter's shape with leading axes of one up to [`STATE_RANK`].
pub type ParamState = Vec<Tensor<STATE_RANK>>;

/// The rank the optimizer's buffers are kept at, since a burn tensor's rank is in its type. Not
/// flattened: a convolution's gradient comes out in another layout, and flattening its buffer
/// would copy it on the GPU at every step.
pub const STATE_RANK: usize = 4;

/// A flat buffer in the shape of its parameter, `dims` (padded to [`STATE_RANK`]), laid out as
/// the parameter is ([`channels_last_memory`]); `None` for a parameter of a higher rank or
/// another size.
pub fn buffer_from_flat(flat: Tensor<1>, dims: &[usize]) -> Option<Tensor<STATE_RANK>> {
    let pad = STATE_RANK.checked_sub(dims.len())?;
    if dims.iter().product::<usize>() != flat.dims()[0] {
        return None;
    }
    let mut shape = [1; STATE_RANK];
    shape[pad..].copy_from_slice(dims);
    let buffer = flat.reshape(shape);
    Some(match pad {
        0 => channels_last_memory(buffer),
        _ => buffer,
    })
}

/// A buffer flattened, as checkpoints hold it (a copy on the GPU, once per checkpoint).
pub fn flat_buffer(buffer: &Tensor<STATE_RANK>) -> Tensor<1> {
    buffer.clone().reshape([buffer.shape().num_elements()])
}

/// What one step's update uses that a schedule may move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    pub lr: f64,
    /// SGD's momentum, or Adam's β1: one-cycle moves it against the learning rate.
    pub momentum: f64,
}

impl Rates {
    /// The rates `config` sets, before any schedule.
    pub fn of(config: &TrainConfig) -> Self {
        Self {
            lr: config.lr,
            momentum: match config.optimizer {
                OptimizerKind::Sgd => config.momentum,
                OptimizerKind::Adam | OptimizerKind::Adamw => ADAM_BETAS.0,
            },
        }
    }
}

#[derive(Clone, Debug)]
pub struct Optimizer {
    kind: OptimizerKind,
    nesterov: bool,
    weight_decay: f64,
    freeze: Freeze,
    /// Steps taken: Adam's bias corrections depend on it.
    pub steps: u64,
    /// By parameter path, e.g. `fc1.weight`; empty before the first step.
    pub state: BTreeMap<String, ParamState>,
}

impl Optimizer {
    pub fn new(config: &TrainConfig) -> Self {
        Self {
            kind: config.optimizer,
            nesterov: config.nesterov,
            weight_decay: config.weight_decay,
            freeze: config.freeze,
            steps: 0,
            state: BTreeMap::new(),
        }
    }

    /// How many state tensors each parameter has once a step is taken.
    pub fn buffers_per_param(config: &TrainConfig) -> usize {
        // One-cycle moves SGD's momentum between 0.85 and 0.95, whatever the setting.
        let cycled = config.schedule.kind == ScheduleKind::Onecycle;
        match config.optimizer {
            OptimizerKind::Sgd if config.momentum == 0.0 && !cycled => 0,
            OptimizerKind::Sgd => 1,
            OptimizerKind::Adam | OptimizerKind::Adamw => 2,
        }
    }

    /// Whether the parameter at `path` (`conv1.weight`), or the layer (`conv1`), is left as it
    /// is.
    pub(crate) fn frozen(&self, path: &str) -> bool {
        match self.freeze {
            Freeze::Nothing => false,
            Freeze::Conv => path.starts_with("conv"),
        }
    }

    /// One step of every parameter of `module` that has a gradient in `grads`, but those
    /// frozen.
    pub fn step<M: Module>(&mut self, rates: Rates, module: M, mut grads: GradientsParams) -> M {
        self.steps += 1;
        map_named(
            module,
            &mut StepMapper {
                optimizer: self,
                grads: &mut grads,
                rates,
            },
        )
    }

    /// The new weight of one parameter, on the inner (non-autodiff) backend.
    fn update<const D: usize>(
        &mut self,
        name: String,
        weight: Tensor<D>,
        grad: Tensor<D>,
        Rates { lr, momentum }: Rates,
    ) -> Tensor<D> {
        let shape = weight.shape();
        let previous = self.state.remove(&name);
        let unpad = |buffer: &Tensor<STATE_RANK>| buffer.clone().reshape(shape.clone());
        let decay = self.weight_decay;
        // PyTorch's L2 weight decay is part of the gradient; AdamW's shrinks the weight apart.
        let (weight, grad) = match self.kind {
            _ if decay == 0.0 => (weight, grad),
            OptimizerKind::Adamw => (weight.mul_scalar(1.0 - lr * decay), grad),
            OptimizerKind::Sgd | OptimizerKind::Adam => {
                let grad = grad.add(weight.clone().mul_scalar(decay));
                (weight, grad)
            }
        };
        // Buffers start as zeros laid out as their weight is, so that fusion writes the update
        // in that layout: it lays an output out as most of its inputs' bytes are.
        let zeros = || channels_last_memory(grad.zeros_like());
        let (delta, state) = match self.kind {
            OptimizerKind::Sgd if momentum == 0.0 => (grad.mul_scalar(lr), Vec::new()),
            // PyTorch: the buffer starts as the first gradient, then b = μ·b + g (no dampening);
            // μ·0 + g is that first gradient. Nesterov steps along g + μ·b.
            OptimizerKind::Sgd => {
                let velocity = match previous.as_deref() {
                    Some([velocity]) => unpad(velocity),
                    _ => zeros(),
                };
                let velocity = velocity.mul_scalar(momentum).add(grad.clone());
                let direction = match self.nesterov {
                    true => grad.add(velocity.clone().mul_scalar(momentum)),
                    false => velocity.clone(),
                };
                (direction.mul_scalar(lr), vec![velocity])
            }
            // PyTorch: w -= lr/(1-β1^t) · m / (√v/√(1-β2^t) + ε).
            OptimizerKind::Adam | OptimizerKind::Adamw => {
                let (beta1, beta2) = (momentum, ADAM_BETAS.1);
                let (m, v) = match previous.as_deref() {
                    Some([m, v]) => (unpad(m), unpad(v)),
                    _ => (zeros(), zeros()),
                };
                let m = m
                    .mul_scalar(beta1)
                    .add(grad.clone().mul_scalar(1.0 - beta1));
                let v = v
                    .mul_scalar(beta2)
                    .add(grad.square().mul_scalar(1.0 - beta2));
                // As PyTorch computes them (a float power): any step count gives a correction.
                let t = self.steps as f64;
                let correction1 = 1.0 - beta1.powf(t);
                let correction2 = 1.0 - beta2.powf(t);
                let denominator = v
                    .clone()
                    .sqrt()
                    .div_scalar(correction2.sqrt())
                    .add_scalar(ADAM_EPSILON);
                (
                    m.clone().div(denominator).mul_scalar(lr / correction1),
                    vec![m, v],
                )
            }
        };
        // The new weight before the buffers are padded, so that fusion takes the subtraction
        // into the update's kernel: a reshape ends a fused block.
        let weight = weight.sub(delta);
        if !state.is_empty() {
            let padded = state.into_iter().map(|buffer| buffer.unsqueeze());
            self.state.insert(name, padded.collect());
        }
        weight
    }
}

struct StepMapper<'a> {
    optimizer: &'a mut Optimizer,
    grads: &'a mut GradientsParams,
    rates: Rates,
}

impl MapNamed for StepMapper<'_> {
    fn map<const D: usize>(&mut self, name: &str, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let Some(grad) = self.grads.remove::<D>(id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        if self.optimizer.frozen(name) {
            return Param::from_mapped_value(id, tensor, mapper);
        }
        let require_grad = tensor.is_require_grad();
        let weight = self
            .optimizer
            .update(name.to_string(), tensor.inner(), grad, self.rates);
        let mut tensor = Tensor::from_inner(weight);
        if require_grad {
            tensor = tensor.require_grad();
        }
        Param::from_mapped_value(id, tensor, mapper)
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;

    use super::*;

    #[derive(Module, Debug)]
    struct Tiny {
        weight: Param<Tensor<1>>,
    }

    /// Two steps of loss = w·x (so the gradient is x) from w = [0.5, -1.0].
    fn two_steps(config: &TrainConfig) -> (Vec<f32>, Optimizer) {
        let device = Device::flex().autodiff();
        let mut optim = Optimizer::new(config);
        let tensor = |values: [f32; 2]| {
            Tensor::<1>::from_data(TensorData::new(values.to_vec(), [2]), &device)
        };
        let mut tiny = Tiny {
            weight: Param::from_tensor(tensor([0.5, -1.0]).require_grad()),
        };
        for x in [[1.0, 2.0], [3.0, -1.0]] {
            let loss = (tiny.weight.val() * tensor(x)).sum();
            let grads = GradientsParams::from_grads(loss.backward(), &tiny);
            tiny = optim.step(Rates::of(config), tiny, grads);
        }
        let weight = tiny.weight.val().into_data().try_to_vec::<f32>().unwrap();
        (weight, optim)
    }

    fn assert_close(found: &[f32], expected: &[f32]) {
        let close = found
            .iter()
            .zip(expected)
            .all(|(a, b)| (a - b).abs() < 1e-6);
        assert!(close, "{found:?} != {expected:?}");
    }

    /// Two steps, because dampening only shows once there is a velocity to dampen.
    #[test]
    fn sgd_momentum_follows_pytorch() {
        let config = TrainConfig {
            lr: 0.1,
            momentum: 0.9,
            ..TrainConfig::default()
        };
        let (weight, optim) = two_steps(&config);
        // PyTorch: v1 = g1, w1 = w0 - lr·v1 = [0.4, -1.2]; v2 = 0.9·v1 + g2 = [3.9, 0.8],
        // w2 = w1 - lr·v2 = [0.01, -1.28]. A dampening of 0.1 would give [0.04, -1.29].
        assert_close(&weight, &[0.01, -1.28]);
        let velocity = optim.state["weight"][0].clone().into_data();
        assert_close(&velocity.try_to_vec::<f32>().unwrap(), &[3.9, 0.8]);
    }

    #[test]
    fn adam_follows_pytorch() {
        let config = TrainConfig {
            lr: 0.1,
            optimizer: OptimizerKind::Adam,
            ..TrainConfig::default()
        };
        let (weight, optim) = two_steps(&config);
        // torch.optim.Adam([w], lr=0.1) on the same two gradients (torch 2, float32).
        assert_close(&weight, &[0.308_221_9, -1.126_633_8]);
        assert_eq!((optim.steps, optim.state["weight"].len()), (2, 2));
    }

    #[test]
    fn plain_sgd_keeps_no_state() {
        let config = TrainConfig {
            lr: 0.1,
            momentum: 0.0,
            ..TrainConfig::default()
        };
        let (weight, optim) = two_steps(&config);
        assert_close(&weight, &[0.1, -1.1]);
        assert!(optim.state.is_empty());
    }
}
