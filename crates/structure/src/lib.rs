//! Nothing to link: this crate's tests read the workspace's sources (tests/).
