mod base;

pub(crate) use base::*;
