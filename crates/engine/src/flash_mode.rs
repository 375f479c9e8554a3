//! `storage.flash.mode`, on its own so that the I/O layer's flash settings can name it without
//! depending on the settings that build them (`settings::flash_mode_defaults`).

use serde::{Deserialize, Serialize};

/// `storage.flash.mode`: flashdoc's co-design for flash (the default), or WiredTiger's
/// behaviour back (`off`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlashMode {
    #[default]
    Flash,
    Off,
}

impl FlashMode {
    pub fn as_str(self) -> &'static str {
        match self {
            FlashMode::Flash => "flash",
            FlashMode::Off => "off",
        }
    }
}

impl std::str::FromStr for FlashMode {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "flash" => Ok(FlashMode::Flash),
            "off" => Ok(FlashMode::Off),
            _ => Err(crate::Error::Config(format!(
                "storage.flash.mode: unknown mode {s:?} (expected flash or off)"
            ))),
        }
    }
}
