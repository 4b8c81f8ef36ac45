//! The one metadata value that must be read before candle's GGUF reader
//! runs: `general.alignment`. candle divides by it (a zero panics), so the
//! header is skimmed here first, key by key, every length checked against
//! the file, nothing but keys allocated.

use std::io::{Read, Seek, SeekFrom};

use anyhow::{Result, bail};

/// GGUF's default alignment of the tensor data, when the file names none.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// The value types of GGUF metadata (the format's numbering).
const STRING: u32 = 8;
const ARRAY: u32 = 9;

/// `general.alignment` as the file declares it (`None`: not declared, or
/// of a type candle does not read it from, where it uses the default).
/// An error only for a header that cannot be walked; candle's reader then
/// names the damage more precisely, so callers may ignore it.
pub fn declared_alignment<R: Read + Seek>(reader: &mut R) -> Result<Option<u64>> {
    let size = reader.seek(SeekFrom::End(0))?;
    reader.seek(SeekFrom::Start(0))?;
    let mut skim = Skim { reader, size };
    let magic = skim.u32()?;
    let version = skim.u32()?;
    if magic != u32::from_le_bytes(*b"GGUF") || !(2..=3).contains(&version) {
        return Ok(None);
    }
    let _tensors = skim.u64()?;
    let entries = skim.u64()?;
    for _ in 0..entries {
        let key = skim.string()?;
        let kind = skim.u32()?;
        if key == "general.alignment" {
            return skim.integer(kind);
        }
        skim.skip_value(kind)?;
    }
    Ok(None)
}

/// Refuses an alignment no tensor can be placed by.
pub fn check_alignment(alignment: u64) -> Result<()> {
    if alignment == 0 || !alignment.is_power_of_two() {
        bail!("general.alignment is {alignment}: GGUF needs a power of two (the default is 32)");
    }
    Ok(())
}

struct Skim<'a, R> {
    reader: &'a mut R,
    size: u64,
}

impl<R: Read + Seek> Skim<'_, R> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut buf = [0u8; N];
        self.reader.read_exact(&mut buf)?;
        Ok(buf)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    /// A whole number of GGUF type 0 to 5 (u8, i8, u16, i16, u32, i32) as
    /// candle reads the alignment; `None` for a negative one or another
    /// type, where candle falls back to the default.
    fn integer(&mut self, kind: u32) -> Result<Option<u64>> {
        let value = match kind {
            0 => u8::from_le_bytes(self.bytes()?) as i64,
            1 => i8::from_le_bytes(self.bytes()?) as i64,
            2 => u16::from_le_bytes(self.bytes()?) as i64,
            3 => i16::from_le_bytes(self.bytes()?) as i64,
            4 => self.u32()? as i64,
            5 => i32::from_le_bytes(self.bytes()?) as i64,
            _ => return Ok(None),
        };
        Ok(u64::try_from(value).ok())
    }

    /// Moves `n` bytes on, if the file holds them.
    fn skip(&mut self, n: u64) -> Result<()> {
        let at = self.reader.stream_position()?;
        match at.checked_add(n) {
            Some(end) if end <= self.size => {
                self.reader.seek(SeekFrom::Start(end))?;
                Ok(())
            }
            _ => bail!("a metadata length runs past the end of the file"),
        }
    }

    fn string(&mut self) -> Result<String> {
        let length = self.u64()?;
        if length > 4096 {
            // No key is this long; skip it rather than allocate it.
            self.skip(length)?;
            return Ok(String::new());
        }
        let mut buf = vec![0u8; length as usize];
        self.reader.read_exact(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// Skips one value of GGUF type `kind`.
    fn skip_value(&mut self, kind: u32) -> Result<()> {
        match kind {
            STRING => {
                let length = self.u64()?;
                self.skip(length)
            }
            ARRAY => {
                let element = self.u32()?;
                let count = self.u64()?;
                match scalar_size(element) {
                    Some(size) => self.skip(count.saturating_mul(size)),
                    None if element == STRING => {
                        (0..count).try_for_each(|_| self.skip_value(STRING))
                    }
                    None => bail!("metadata holds an array of arrays or of an unknown type"),
                }
            }
            _ => match scalar_size(kind) {
                Some(size) => self.skip(size),
                None => bail!("metadata value type {kind} is not GGUF's"),
            },
        }
    }
}

/// Bytes of a scalar of GGUF type `kind`.
fn scalar_size(kind: u32) -> Option<u64> {
    match kind {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}
