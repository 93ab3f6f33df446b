//! A decorator that writes one text line per call.

use std::fmt::{self, Display};
use std::io::Write;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::{Result, len_u64};
use crate::storage::{CommitPoint, LockMode, ReadSegment, Storage, WriteSegment};

/// Where [`Logging`] sends its lines.
enum Sink {
    Writer(Box<dyn Write + Send>),
    Memory(Vec<String>),
}

/// Decorator that logs every call as one line of text, after the call returns.
///
/// Line formats (`<result>` is `ok` or `err=<error message>`):
///
/// ```text
/// read offset=0 len=8 ok
/// write offset=256 len=64 ok
/// len ok=4096
/// set_len len=100 ok
/// sync ok
/// lock mode=exclusive err=storage is locked by another handle (...)
/// unlock ok
/// read_vectored segments=3 bytes=96 ok
/// write_vectored segments=2 bytes=4160 err=injected failure of write_vectored call #1
/// ```
///
/// A vectored call is one line with its segment count and the total bytes of
/// its segments (requested, so also on error).
///
/// Results, including errors, pass through unchanged. Failures of the sink
/// itself are ignored: logging never changes what the storage does.
///
/// ```
/// use h5_io::{Logging, MemoryStorage, Storage};
///
/// let s = Logging::to_vec(MemoryStorage::new());
/// s.write_at(256, &[0; 64])?;
/// assert_eq!(s.lines(), ["write offset=256 len=64 ok"]);
/// # Ok::<(), h5_io::Error>(())
/// ```
pub struct Logging<S> {
    inner: S,
    sink: Mutex<Sink>,
}

impl<S> Logging<S> {
    /// Log to `sink`, one line per call, flushing after each line.
    pub fn new(inner: S, sink: Box<dyn Write + Send>) -> Self {
        Logging {
            inner,
            sink: Mutex::new(Sink::Writer(sink)),
        }
    }

    /// Keep the lines in memory; read them with [`lines`](Self::lines).
    pub fn to_vec(inner: S) -> Self {
        Logging {
            inner,
            sink: Mutex::new(Sink::Memory(Vec::new())),
        }
    }

    /// The lines logged so far by a [`to_vec`](Self::to_vec) logger (without
    /// line terminators); empty for a logger writing to a sink.
    pub fn lines(&self) -> Vec<String> {
        match &*self.sink_guard() {
            Sink::Memory(lines) => lines.clone(),
            Sink::Writer(_) => Vec::new(),
        }
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Unwrap, dropping the sink.
    pub fn into_inner(self) -> S {
        self.inner
    }

    fn sink_guard(&self) -> MutexGuard<'_, Sink> {
        self.sink.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn emit(&self, line: String) {
        match &mut *self.sink_guard() {
            Sink::Memory(lines) => lines.push(line),
            Sink::Writer(w) => {
                let _ = writeln!(w, "{line}");
                let _ = w.flush();
            }
        }
    }

    /// Log `head` followed by the outcome of `r`, and return `r`.
    fn log<T>(
        &self,
        head: fmt::Arguments<'_>,
        r: Result<T>,
        ok: impl FnOnce(&T) -> String,
    ) -> Result<T> {
        let line = match &r {
            Ok(v) => format!("{head}{}", ok(v)),
            Err(e) => format!("{head}err={e}"),
        };
        self.emit(line);
        r
    }
}

fn ok<T>(_: &T) -> String {
    "ok".to_owned()
}

fn ok_value<T: Display>(v: &T) -> String {
    format!("ok={v}")
}

impl<S: fmt::Debug> fmt::Debug for Logging<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sink = match &*self.sink_guard() {
            Sink::Memory(lines) => format!("memory ({} lines)", lines.len()),
            Sink::Writer(_) => "writer".to_owned(),
        };
        f.debug_struct("Logging")
            .field("inner", &self.inner)
            .field("sink", &sink)
            .finish()
    }
}

#[deny(clippy::missing_trait_methods)]
impl<S: Storage> Storage for Logging<S> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let r = self.inner.read_at(offset, buf);
        self.log(
            format_args!("read offset={offset} len={} ", buf.len()),
            r,
            ok,
        )
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let r = self.inner.write_at(offset, data);
        self.log(
            format_args!("write offset={offset} len={} ", data.len()),
            r,
            ok,
        )
    }

    fn len(&self) -> Result<u64> {
        let r = self.inner.len();
        self.log(format_args!("len "), r, ok_value)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let r = self.inner.set_len(len);
        self.log(format_args!("set_len len={len} "), r, ok)
    }

    fn sync(&self) -> Result<()> {
        let r = self.inner.sync();
        self.log(format_args!("sync "), r, ok)
    }

    fn lock(&self, mode: LockMode) -> Result<()> {
        let r = self.inner.lock(mode);
        self.log(format_args!("lock mode={mode} "), r, ok)
    }

    fn unlock(&self) -> Result<()> {
        let r = self.inner.unlock();
        self.log(format_args!("unlock "), r, ok)
    }

    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        let r = self.inner.read_vectored(segments);
        let bytes: u64 = segments.iter().map(|s| len_u64(s.buf.len())).sum();
        self.log(
            format_args!("read_vectored segments={} bytes={bytes} ", segments.len()),
            r,
            ok,
        )
    }

    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        let r = self.inner.write_vectored(segments);
        let bytes: u64 = segments.iter().map(|s| len_u64(s.data.len())).sum();
        self.log(
            format_args!("write_vectored segments={} bytes={bytes} ", segments.len()),
            r,
            ok,
        )
    }

    fn commit(&self, point: &CommitPoint) -> Result<()> {
        let r = self.inner.commit(point);
        self.log(format_args!("commit unused={} ", point.unused.len()), r, ok)
    }

    fn journals_overwrites(&self) -> bool {
        self.inner.journals_overwrites()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, FaultInjection, IoOp, MemoryStorage};
    use std::sync::Arc;

    #[test]
    fn lines_exact() {
        let s = Logging::to_vec(FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::Sync, 1));
        s.write_at(256, &[0; 64]).unwrap();
        let mut buf = [0; 8];
        s.read_at(0, &mut buf).unwrap();
        let e = s.read_at(400, &mut buf).unwrap_err();
        assert!(matches!(e, Error::OutOfBounds { .. }));
        assert!(matches!(s.sync(), Err(Error::Injected { .. })));
        s.sync().unwrap();
        assert_eq!(s.len().unwrap(), 320);
        s.set_len(100).unwrap();
        s.lock(LockMode::Exclusive).unwrap();
        s.lock(LockMode::Shared).unwrap();
        s.unlock().unwrap();
        assert_eq!(
            s.lines(),
            [
                "write offset=256 len=64 ok",
                "read offset=0 len=8 ok",
                "read offset=400 len=8 err=read of 8 bytes at offset 400 past end of storage (320 bytes)",
                "sync err=injected failure of sync call #1",
                "sync ok",
                "len ok=320",
                "set_len len=100 ok",
                "lock mode=exclusive ok",
                "lock mode=shared ok",
                "unlock ok",
            ]
        );
    }

    #[test]
    fn vectored_lines() {
        let s = Logging::to_vec(
            FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::WriteVectored, 1),
        );
        let segs = [
            WriteSegment::new(4096, &[1; 64]),
            WriteSegment::new(0, &[2; 4096]),
        ];
        assert!(s.write_vectored(&segs).is_err());
        s.write_vectored(&segs).unwrap();
        s.write_vectored(&[]).unwrap();
        let (mut a, mut b, mut c) = ([0; 32], [0; 32], [0; 32]);
        s.read_vectored(&mut [
            ReadSegment::new(0, &mut a),
            ReadSegment::new(4096, &mut b),
            ReadSegment::new(32, &mut c),
        ])
        .unwrap();
        let e = s
            .read_vectored(&mut [ReadSegment::new(4150, &mut a)])
            .unwrap_err();
        assert!(matches!(e, Error::OutOfBounds { .. }));
        assert_eq!(
            s.lines(),
            [
                "write_vectored segments=2 bytes=4160 err=injected failure of write_vectored call #1",
                "write_vectored segments=2 bytes=4160 ok",
                "write_vectored segments=0 bytes=0 ok",
                "read_vectored segments=3 bytes=96 ok",
                "read_vectored segments=1 bytes=32 err=read of 32 bytes at offset 4150 past end of storage (4160 bytes)",
            ]
        );
    }

    /// A `Write` whose bytes can be inspected after being moved into the logger.
    #[derive(Clone, Default)]
    struct SharedBuf(Arc<Mutex<Vec<u8>>>);

    impl Write for SharedBuf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writer_sink() {
        let buf = SharedBuf::default();
        let s = Logging::new(MemoryStorage::new(), Box::new(buf.clone()));
        s.write_at(0, b"ab").unwrap();
        s.len().unwrap();
        assert!(s.lines().is_empty());
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "write offset=0 len=2 ok\nlen ok=2\n");
        assert!(format!("{s:?}").contains("writer"));
    }

    #[test]
    fn failing_sink_is_ignored() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Err(std::io::Error::other("disk full"))
            }
        }
        let s = Logging::new(MemoryStorage::new(), Box::new(Broken));
        s.write_at(0, b"ab").unwrap();
        assert_eq!(s.into_inner().snapshot(), b"ab");
    }
}
