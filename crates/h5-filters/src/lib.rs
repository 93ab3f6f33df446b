//! The HDF5 filter pipeline. (In progress.)
