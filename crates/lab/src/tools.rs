//! The programs a `real-wiredtiger` run needs. realwt.rs finds or builds them; realwt.rs and
//! secantus.rs run them.

use std::path::PathBuf;

/// WiredTiger's driver, the shim, and SecantusDB's server.
pub(crate) struct Tools {
    pub(crate) driver: PathBuf,
    pub(crate) shim: PathBuf,
    pub(crate) secantusd: PathBuf,
}
