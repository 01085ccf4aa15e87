//! The learning-rate range test, as the session runs it: on the device a run would take, from
//! the model a run would start from, while no run goes.

use std::rc::Rc;

use super::protocol::FindLr;
use super::{Host, Session, SessionError};
use crate::device::select_devices;
use crate::model::NetConfig;
use crate::platform::provoked_panic;
use crate::train::lr_find::{LrFinding, LrPoint, find_lr};
use crate::train::{Placement, TrainControl};

impl<H: Host> Session<H> {
    pub(super) async fn find_lr(
        self: &Rc<Self>,
        request: FindLr,
        progress: Rc<dyn Fn(LrPoint)>,
    ) -> Result<LrFinding, SessionError> {
        let FindLr {
            config,
            backend,
            from_model,
            range,
        } = request;
        if self.busy() {
            return Err(SessionError::Busy);
        }
        config.validate()?;
        let data = self.run_data(&config)?;
        let start = self.start_from(config.model, from_model)?;
        // Busy from here: Stop ends the test, and a run asked for meanwhile is refused.
        let control = TrainControl::default();
        let starting = self.hold_starting(control.clone());
        let found = async {
            self.stop_warm_up().await;
            provoked_panic("FindLr");
            let devices = select_devices(&config.devices, backend).await?;
            devices.check_batch(config.model, config.batch_size)?;
            let model = match start {
                Some(net) => net,
                None => NetConfig::from(config.model).init(&devices.main().device, config.seed),
            };
            let on_point = |point: &LrPoint| progress(*point);
            Ok(find_lr(
                &model,
                &config,
                range,
                &data,
                Placement::on(&devices.devices()),
                &control,
                on_point,
            )
            .await?)
        }
        .await;
        drop(starting);
        found
    }
}
