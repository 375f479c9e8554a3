//! Replaying file-level I/O through a [`FsLayout`] onto a device, and sizing a device to a
//! trace.

use crate::device::{BlockDevice, HostOp, OpKind};
use crate::error::SsdError;
use crate::fs_layout::{AllocPolicy, Extent, FsLayout};
use crate::trace::{FileOp, FileOpKind, Reader, Record};
use serde::Serialize;

/// What the layout did during a replay.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LayoutStats {
    pub alloc_policy: Option<AllocPolicy>,
    pub fs_discard: bool,
    /// Pages returned to the filesystem (truncate, remove, punched holes).
    pub freed_pages: u64,
    /// Of those, pages sent to the device as TRIM (all of them with discard on).
    pub trimmed_pages: u64,
    pub peak_used_pages: u64,
    pub capacity_pages: u64,
}

/// File-level I/O → LBA ranges → host I/Os. With `discard` on, every LBA range the
/// filesystem frees is trimmed at once (online discard).
pub struct FsReplayer {
    layout: FsLayout,
    discard: bool,
    buf: Vec<Extent>,
    stats: LayoutStats,
}

impl FsReplayer {
    pub fn new(capacity_pages: u64, policy: AllocPolicy, discard: bool) -> Result<Self, SsdError> {
        Ok(FsReplayer {
            layout: FsLayout::new(capacity_pages, policy)?,
            discard,
            buf: Vec::new(),
            stats: LayoutStats {
                alloc_policy: Some(policy),
                fs_discard: discard,
                capacity_pages,
                ..Default::default()
            },
        })
    }

    pub fn layout(&self) -> &FsLayout {
        &self.layout
    }
    pub fn stats(&self) -> LayoutStats {
        let mut s = self.stats.clone();
        s.peak_used_pages = self.layout.peak_used_pages();
        s
    }

    fn each(
        &mut self,
        dev: &mut impl BlockDevice,
        time_ns: u64,
        kind: OpKind,
        stream: u32,
    ) -> Result<(), SsdError> {
        for &(lba, pages) in &self.buf {
            dev.submit(&HostOp {
                time_ns,
                kind,
                lba,
                pages,
                stream,
            })?;
        }
        Ok(())
    }

    fn freed(&mut self, dev: &mut impl BlockDevice, time_ns: u64) -> Result<(), SsdError> {
        let pages: u64 = self.buf.iter().map(|e| e.1).sum();
        self.stats.freed_pages += pages;
        if self.discard {
            self.stats.trimmed_pages += pages;
            self.each(dev, time_ns, OpKind::Trim, 0)?;
        }
        Ok(())
    }

    pub fn write(
        &mut self,
        dev: &mut impl BlockDevice,
        time_ns: u64,
        file: u64,
        offset: u64,
        len: u64,
        stream: u32,
    ) -> Result<(), SsdError> {
        self.layout.write(file, offset, len, &mut self.buf)?;
        self.each(dev, time_ns, OpKind::Write, stream)
    }
    pub fn read(
        &mut self,
        dev: &mut impl BlockDevice,
        time_ns: u64,
        file: u64,
        offset: u64,
        len: u64,
    ) -> Result<(), SsdError> {
        self.layout.mapped(file, offset, len, &mut self.buf);
        self.each(dev, time_ns, OpKind::Read, 0)
    }
    pub fn punch(
        &mut self,
        dev: &mut impl BlockDevice,
        time_ns: u64,
        file: u64,
        offset: u64,
        len: u64,
    ) -> Result<(), SsdError> {
        self.layout.punch(file, offset, len, &mut self.buf);
        self.freed(dev, time_ns)
    }
    pub fn truncate(
        &mut self,
        dev: &mut impl BlockDevice,
        time_ns: u64,
        file: u64,
        len: u64,
    ) -> Result<(), SsdError> {
        self.layout.truncate(file, len, &mut self.buf);
        self.freed(dev, time_ns)
    }
    pub fn remove(
        &mut self,
        dev: &mut impl BlockDevice,
        time_ns: u64,
        file: u64,
    ) -> Result<(), SsdError> {
        self.layout.remove(file, &mut self.buf);
        self.freed(dev, time_ns)
    }

    pub fn apply(&mut self, dev: &mut impl BlockDevice, op: &FileOp) -> Result<(), SsdError> {
        match op.kind {
            FileOpKind::Write => {
                self.write(dev, op.time_ns, op.file, op.offset, op.bytes, op.stream)
            }
            FileOpKind::Read => self.read(dev, op.time_ns, op.file, op.offset, op.bytes),
            FileOpKind::Trim => self.punch(dev, op.time_ns, op.file, op.offset, op.bytes),
            FileOpKind::Truncate => self.truncate(dev, op.time_ns, op.file, op.offset),
            FileOpKind::Remove => self.remove(dev, op.time_ns, op.file),
        }
    }
}

/// Tracks the most pages a file-level trace ever holds at once, by running its layout on
/// an effectively unbounded space (next-fit/first-fit do not change the count).
pub struct PeakUsage {
    layout: FsLayout,
    buf: Vec<Extent>,
}

impl Default for PeakUsage {
    fn default() -> Self {
        Self::new()
    }
}

impl PeakUsage {
    pub fn new() -> Self {
        PeakUsage {
            layout: FsLayout::new(u32::MAX as u64 - 1, AllocPolicy::FirstFit)
                .expect("valid capacity"),
            buf: Vec::new(),
        }
    }
    pub fn write(&mut self, file: u64, offset: u64, len: u64) -> Result<(), SsdError> {
        self.layout.write(file, offset, len, &mut self.buf)
    }
    pub fn punch(&mut self, file: u64, offset: u64, len: u64) {
        self.layout.punch(file, offset, len, &mut self.buf)
    }
    pub fn truncate(&mut self, file: u64, len: u64) {
        self.layout.truncate(file, len, &mut self.buf)
    }
    pub fn remove(&mut self, file: u64) {
        self.layout.remove(file, &mut self.buf)
    }
    pub fn peak_pages(&self) -> u64 {
        self.layout.peak_used_pages()
    }
}

/// What a pass over a trace found, for `--size-to-trace`.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TraceExtent {
    pub records: u64,
    /// Block-level records: one past the highest LBA touched.
    pub lba_end: u64,
    /// File-level records: the most pages the files held at once.
    pub peak_file_pages: u64,
}

/// One pass over a block- or file-level trace.
pub fn scan(reader: Reader) -> Result<TraceExtent, SsdError> {
    let mut ext = TraceExtent::default();
    let mut peak = PeakUsage::new();
    let mut any_file = false;
    for rec in reader {
        ext.records += 1;
        match rec? {
            Record::Host(h) => ext.lba_end = ext.lba_end.max(h.lba.saturating_add(h.pages)),
            Record::File(f) => {
                any_file = true;
                match f.kind {
                    FileOpKind::Write => peak.write(f.file, f.offset, f.bytes)?,
                    FileOpKind::Read => {}
                    FileOpKind::Trim => peak.punch(f.file, f.offset, f.bytes),
                    FileOpKind::Truncate => peak.truncate(f.file, f.offset),
                    FileOpKind::Remove => peak.remove(f.file),
                }
            }
        }
    }
    if any_file {
        ext.peak_file_pages = peak.peak_pages();
    }
    Ok(ext)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SsdConfig;
    use crate::device::Ssd;

    #[test]
    fn removing_a_file_trims_only_with_discard() {
        for discard in [false, true] {
            let cfg = SsdConfig::from_physical(64, 16, 0.25).unwrap();
            let cap = cfg.logical_pages;
            let mut ssd = Ssd::new(cfg).unwrap();
            let mut fs = FsReplayer::new(cap, AllocPolicy::NextFit, discard).unwrap();
            fs.write(&mut ssd, 0, 1, 0, 40 * 4096, 1).unwrap();
            fs.write(&mut ssd, 0, 2, 0, 10 * 4096, 2).unwrap();
            fs.remove(&mut ssd, 0, 1).unwrap();
            let st = ssd.stats();
            assert_eq!(st.host_write_pages, 50);
            assert_eq!(st.per_stream_host_pages[1], 40);
            assert_eq!(st.trim_invalidated_pages, if discard { 40 } else { 0 });
            assert_eq!(ssd.ftl().mapped_pages(), if discard { 10 } else { 50 });
            assert_eq!(fs.stats().freed_pages, 40);
        }
    }
}
