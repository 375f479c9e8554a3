//! The block manager (WiredTiger `src/block`): one [`BlockFile`] per table file.
//!
//! | file | job |
//! | --- | --- |
//! | `extent.rs` | extent sets (alloc / avail / discard / pending) and the extent-list codec |
//! | `image.rs` | a block's bytes: header, checksum, compression; the address cookie; the descriptor |
//! | `file.rs` | allocation, free under checkpoint rules, read and write through the I/O seam, a file's checkpoint |

mod extent;
mod file;
mod image;

pub use extent::{decode_extents, encode_extents, ExtentSet};
pub use file::{BlockFile, BlockStats, ExtentSummary, FileCheckpoint};
pub use image::{build_block, Addr, BlockImage, BLOCK_HEADER};
