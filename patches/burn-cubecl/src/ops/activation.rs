use crate::CubeBackend;
use burn_backend::ops::ActivationOps;

impl ActivationOps<Self> for CubeBackend {}
