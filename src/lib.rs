//! nvlabel
