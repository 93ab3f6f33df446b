//! Object header messages. (In progress.)

pub mod attribute;
pub mod dataspace;
pub mod fill_value;
