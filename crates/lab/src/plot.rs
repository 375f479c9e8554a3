//! Plots (PNG and SVG) with plotters.
use anyhow::{Context, Result};
use std::sync::Once;

static FONT: Once = Once::new();

/// Registers DejaVu Sans (or another sans font found on the system) as "sans-serif".
pub fn init_fonts() -> Result<()> {
    let mut err = None;
    FONT.call_once(|| {
        let candidates = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        ];
        for c in candidates {
            if let Ok(bytes) = std::fs::read(c) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, bytes).is_ok() {
                    return;
                }
            }
        }
        err = Some(anyhow::anyhow!("no TrueType sans font found (install fonts-dejavu-core)"));
    });
    match err {
        Some(e) => Err(e).context("plot fonts"),
        None => Ok(()),
    }
}
