//! Files written through libhdf5's family, multi or split drivers, opened for reading: one
//! HDF5 address space stored in several member files ([`h5_io::MemberFiles`]).
//!
//! - **Family** (`NCSAfami`): the space is cut into members of one size, named by a printf
//!   pattern (`data%05d.h5`). Opened from the pattern, as libhdf5 opens it, or from member 0's
//!   name, the last run of digits in it standing for the member number.
//! - **Multi and split** (`NCSAmult`): each member serves the addresses from its start up to
//!   the next member's; their names are templates of one base name (`%s-s.h5`, `%s-r.h5`).
//!   Opened from the member that holds the superblock (`base-s.h5`, or `base-m.h5` for split),
//!   or from the base name when no file has that name.
//!
//! The members' layout comes from the driver information of the superblock (version 0 or 1)
//! or of its extension (a driver info message in the extension's first chunk). Writing such
//! files is not supported (the engine refuses a driver information block).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use h5_format::message::driver_info::DriverInfo;
use h5_format::object_header;
use h5_format::superblock::{self, DriverInfoBlock, MultiMember, Superblock};
use h5_io::{FileOptions, FileStorage, Member, MemberFiles, OpenMode, Storage, StorageExt};

use crate::{Error, Result};

/// Most members a family may have (a family of 1 GiB members this long is 64 TiB).
const MAX_FAMILY_MEMBERS: u32 = 65_536;

/// How a file's superblock says its bytes are stored, when not plainly in the one file.
enum Driver {
    /// `NCSAfami`: each member's size.
    Family(u64),
    /// `NCSAmult`: the members.
    Multi(Vec<MultiMember>),
    /// Metadata in a metadata cache image (libhdf5's `H5Pset_mdc_image_config`, a message of
    /// type 0x0018 in the superblock extension): its entries may not have been written where
    /// they belong until libhdf5 opens the file for writing once.
    CacheImage,
}

/// The message type of libhdf5's metadata cache image message.
const CACHE_IMAGE_MESSAGE: u16 = 0x0018;

/// The error for a file whose metadata is in a cache image.
fn cache_image_error(path: &Path) -> Error {
    Error::Unsupported(format!(
        "{}: its metadata is in a metadata cache image (libhdf5's H5Pset_mdc_image_config), \
         which h5 does not read; opening it for writing once with libhdf5 (h5py) writes the \
         metadata back in place",
        path.display()
    ))
}

/// A family's printf pattern: the file name holds one integer directive (`%d`, `%5d`, `%05d`,
/// `%u`, ...). `%%` stands for a percent sign.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pattern {
    dir: PathBuf,
    prefix: String,
    suffix: String,
    width: usize,
    zero_pad: bool,
}

impl Pattern {
    /// The pattern in `path`'s file name, if it has exactly one integer directive.
    pub(crate) fn parse(path: &Path) -> Option<Pattern> {
        let name = path.file_name()?.to_str()?;
        let mut prefix = String::new();
        let mut found: Option<(usize, bool, usize)> = None; // (width, zero pad, end of directive)
        let bytes = name.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'%' {
                i += 1;
                continue;
            }
            if bytes.get(i + 1) == Some(&b'%') {
                i += 2;
                continue;
            }
            let mut j = i + 1;
            let zero_pad = bytes.get(j) == Some(&b'0');
            let digits_from = j;
            while bytes.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            let width = name[digits_from..j].parse().unwrap_or(0);
            if !matches!(bytes.get(j), Some(b'd' | b'u' | b'i')) || found.is_some() {
                return None;
            }
            prefix = name[..i].replace("%%", "%");
            found = Some((width, zero_pad, j + 1));
            i = j + 1;
        }
        let (width, zero_pad, end) = found?;
        Some(Pattern {
            dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            prefix,
            suffix: name[end..].replace("%%", "%"),
            width,
            zero_pad,
        })
    }

    /// The pattern member 0's name makes: its last run of digits (which must read 0) stands
    /// for the member number, zero-padded to the run's width.
    fn from_member_zero(path: &Path) -> Option<Pattern> {
        let name = path.file_name()?.to_str()?;
        // The number is in the stem: `data00000.h5`'s extension holds a digit too.
        let stem_len = name.rfind('.').filter(|&i| i > 0).unwrap_or(name.len());
        let end = name[..stem_len].rfind(|c: char| c.is_ascii_digit())? + 1;
        let start = name[..end]
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        let digits = &name[start..end];
        if digits.bytes().any(|b| b != b'0') {
            return None;
        }
        Some(Pattern {
            dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            prefix: name[..start].to_string(),
            suffix: name[end..].to_string(),
            width: digits.len(),
            zero_pad: true,
        })
    }

    /// Member `i`'s path.
    fn member(&self, i: u32) -> PathBuf {
        let number = if self.zero_pad {
            format!("{i:0width$}", width = self.width)
        } else {
            format!("{i:width$}", width = self.width)
        };
        self.dir
            .join(format!("{}{number}{}", self.prefix, self.suffix))
    }
}

/// Opens the family `pattern` names: members 0, 1, ... as long as they exist. The member size
/// comes from member 0's driver information, else (a file without it) from member 0's length.
pub(crate) fn open_family(pattern: &Pattern, options: FileOptions) -> Result<Arc<MemberFiles>> {
    let first = FileStorage::open_with(pattern.member(0), OpenMode::ReadOnly, options)?;
    let member_size = match driver_of(&first)? {
        Some(Driver::Family(size)) => size,
        _ => first.len()?,
    };
    family_members(pattern, first, member_size, options)
}

/// The family `pattern` names, member 0 (`first`) already open, of members of `member_size`
/// bytes: members 1, 2, ... opened as long as they exist.
fn family_members(
    pattern: &Pattern,
    first: FileStorage,
    member_size: u64,
    options: FileOptions,
) -> Result<Arc<MemberFiles>> {
    if member_size == 0 {
        return Err(Error::Invalid(format!(
            "{}: family member 0 is empty",
            pattern.member(0).display()
        )));
    }
    let mut storages: Vec<Arc<dyn Storage>> = vec![Arc::new(first)];
    for i in 1..MAX_FAMILY_MEMBERS {
        let path = pattern.member(i);
        if !path.exists() {
            break;
        }
        storages.push(Arc::new(FileStorage::open_with(
            path,
            OpenMode::ReadOnly,
            options,
        )?));
    }
    Ok(Arc::new(MemberFiles::family(storages, member_size)?))
}

/// The members of the file opened at `path` as `data`, when its superblock says it is one
/// member of several (`data` becomes the member it is); else `data` back (the common case).
pub(crate) fn members_of(
    path: &Path,
    data: FileStorage,
    options: FileOptions,
) -> Result<std::result::Result<Arc<MemberFiles>, FileStorage>> {
    let driver = detect(path, &data, options)?;
    match driver {
        None => Ok(Err(data)),
        Some(Driver::Family(member_size)) => {
            let pattern = Pattern::from_member_zero(path).ok_or_else(|| {
                Error::Unsupported(format!(
                    "{}: this file is member 0 of a family (libhdf5's family driver) but its \
                     name has no member number to follow; open it by its printf pattern \
                     (for example `data%05d.h5`)",
                    path.display()
                ))
            })?;
            family_members(&pattern, data, member_size, options).map(Ok)
        }
        Some(Driver::Multi(members)) => open_multi(path, Some(data), &members, options).map(Ok),
        Some(Driver::CacheImage) => Err(cache_image_error(path)),
    }
}

/// The driver of the file opened at `path` as `data`: its superblock's driver information,
/// else a family told by the name (old releases wrote none), else multi driver information
/// reached through the driver's default layout. `None` for a file of one member.
fn detect(path: &Path, data: &FileStorage, options: FileOptions) -> Result<Option<Driver>> {
    // A superblock or extension that does not decode is the engine's to report, as before.
    let facts = superblock_facts(data).ok().flatten();
    let driver = match facts {
        Some((Some(driver), _)) => Some(driver),
        // Files of old libhdf5 releases have no driver information: a superblock whose end of
        // file lies past this file's end, and a member 1 beside it, make a family.
        Some((None, eof)) if eof > data.len()? && family_member_one(path).is_some() => {
            Some(Driver::Family(data.len()?))
        }
        // A version 2 or 3 superblock keeps the driver information in its extension, which a
        // multi or split file stores in another member: read it through the driver's default
        // layout, if the name fits one.
        None => driver_through_default_layout(path, options),
        _ => None,
    };
    Ok(driver)
}

/// Refuses to open for writing a file that is one member of several (writing it alone would
/// break the others' address space).
pub(crate) fn refuse_members(path: &Path, data: &FileStorage) -> Result<()> {
    let options = FileOptions {
        locking: h5_io::Locking::Disabled,
        lock: None,
    };
    match detect(path, data, options)? {
        None => Ok(()),
        Some(Driver::CacheImage) => Err(cache_image_error(path)),
        Some(_) => Err(Error::Unsupported(format!(
            "{}: writing a file of libhdf5's family, multi or split driver (h5 reads them)",
            path.display()
        ))),
    }
}

/// Member 1 of the family whose member 0 is at `path`, if that file exists.
fn family_member_one(path: &Path) -> Option<PathBuf> {
    let member = Pattern::from_member_zero(path)?.member(1);
    member.exists().then_some(member)
}

/// Opens the members of a multi (or split) file whose superblock member is at `path`.
fn open_multi(
    path: &Path,
    holder_data: Option<FileStorage>,
    members: &[MultiMember],
    options: FileOptions,
) -> Result<Arc<MemberFiles>> {
    let unsupported = |why: String| {
        Error::Unsupported(format!(
            "{}: a file of libhdf5's multi or split driver: {why}",
            path.display()
        ))
    };
    let holder = members
        .iter()
        .find(|m| m.types.contains(&1))
        .ok_or_else(|| unsupported("no member holds the superblock".into()))?;
    let base = base_name(path, &holder.name_template).ok_or_else(|| {
        unsupported(format!(
            "its name does not fit its member template `{}`",
            holder.name_template
        ))
    })?;
    let mut holder_data = holder_data;
    let mut parts = Vec::with_capacity(members.len());
    // Each member serves up to the next member's start (the last one to its end of address).
    let mut starts: Vec<u64> = members.iter().map(|m| m.start).collect();
    starts.sort_unstable();
    for m in members {
        let member_path = fill_template(&m.name_template, &base)
            .ok_or_else(|| unsupported(format!("member template `{}`", m.name_template)))?;
        // The whole range up to the next member, zero-filled past the member's end: the end
        // of address recorded may be smaller than what a whole structure read asks (a
        // superblock member of 48 bytes is read 100 bytes at a time).
        let next = starts.iter().copied().find(|&s| s > m.start);
        let limit = next.map_or(u64::MAX - m.start, |n| n - m.start);
        let opened = if let Some(data) = holder_data.take_if(|_| m.id == holder.id) {
            Ok(data)
        } else {
            FileStorage::open_with(&member_path, OpenMode::ReadOnly, options).map_err(Error::from)
        };
        let storage = match opened {
            Ok(s) => s,
            // A member that was never written (libhdf5 creates every member, empty ones too,
            // but a copy may leave them out) reads as nothing when nothing lies in it.
            // A default layout (end of address unknown) names members a file may not use.
            Err(_) if m.end_of_address == 0 || m.end_of_address == u64::MAX => continue,
            Err(e) => return Err(e),
        };
        parts.push(Member {
            start: m.start,
            limit,
            storage: Arc::new(storage),
        });
    }
    Ok(Arc::new(MemberFiles::new(parts)?))
}

/// libhdf5's largest address (`HADDR_MAX`): the default layouts cut the space by it.
const HADDR_MAX: u64 = u64::MAX - 1;

/// The default member layouts of libhdf5's multi driver (six members, `%s-s.h5` holding the
/// superblock) and split driver (`%s-m.h5` and `%s-r.h5`), whose superblock member `path`'s
/// name fits; their ends of address unknown (`u64::MAX`).
fn default_layout(path: &Path) -> Option<Vec<MultiMember>> {
    let member = |id: u8, types: &[u8], start: u64, suffix: &str| MultiMember {
        id,
        types: types.to_vec(),
        start,
        end_of_address: u64::MAX,
        name_template: format!("%s{suffix}"),
    };
    let name = path.to_str()?;
    if name.ends_with("-s.h5") {
        let step = HADDR_MAX / 6;
        let suffixes = ["-s.h5", "-b.h5", "-r.h5", "-g.h5", "-l.h5", "-o.h5"];
        Some(
            (1u8..=6)
                .zip(suffixes)
                .map(|(id, suffix)| member(id, &[id], u64::from(id - 1) * step, suffix))
                .collect(),
        )
    } else if name.ends_with("-m.h5") {
        Some(vec![
            member(1, &[1, 2, 4, 5, 6], 0, "-m.h5"),
            member(3, &[3], HADDR_MAX / 2, "-r.h5"),
        ])
    } else {
        None
    }
}

/// The multi driver information of the file whose superblock member is at `path`, read through
/// the driver's default layout (when the name fits one and the superblock's extension lies in
/// another member).
fn driver_through_default_layout(path: &Path, options: FileOptions) -> Option<Driver> {
    let layout = default_layout(path)?;
    let through = open_multi(path, None, &layout, options).ok()?;
    match superblock_facts(through.as_ref()).ok()?? {
        (Some(driver @ Driver::Multi(_)), _) => Some(driver),
        _ => None,
    }
}

/// The base name `path` was made from by `template` (`%s-s.h5` and `dir/data-s.h5` give
/// `dir/data`).
fn base_name(path: &Path, template: &str) -> Option<String> {
    let (before, after) = split_template(template)?;
    let name = path.to_str()?;
    let rest = name.strip_suffix(after.as_str())?;
    // The prefix applies to the whole base (libhdf5 formats the name the user opened).
    rest.strip_prefix(before.as_str()).map(str::to_string)
}

/// `template` with its `%s` replaced by `base`.
fn fill_template(template: &str, base: &str) -> Option<PathBuf> {
    let (before, after) = split_template(template)?;
    Some(PathBuf::from(format!("{before}{base}{after}")))
}

/// The text before and after the one `%s` of a member template (`%%` is a percent sign); other
/// directives are not supported.
fn split_template(template: &str) -> Option<(String, String)> {
    let mut parts = template.split("%%");
    let mut before = String::new();
    let mut after = String::new();
    let mut seen = false;
    let mut first = true;
    for part in parts.by_ref() {
        let target = if seen { &mut after } else { &mut before };
        if !first {
            target.push('%');
        }
        first = false;
        if part.contains('%') {
            let (a, b) = part.split_once("%s")?;
            if seen || a.contains('%') || b.contains('%') {
                return None;
            }
            target.push_str(a);
            seen = true;
            after.push_str(b);
        } else {
            target.push_str(part);
        }
    }
    seen.then_some((before, after))
}

/// The base name of a multi or split file given by its base (`data` for `data-s.h5` and
/// `data-r.h5`): the member that holds the superblock, trying the default templates of the
/// multi (`-s.h5`) and split (`-m.h5`) drivers.
pub(crate) fn superblock_member(base: &Path) -> Option<PathBuf> {
    let name = base.to_str()?;
    ["-s.h5", "-m.h5"]
        .iter()
        .map(|ext| PathBuf::from(format!("{name}{ext}")))
        .find(|p| p.exists())
}

/// The driver information of the file in `data`: the driver information block of a version 0
/// or 1 superblock, or the driver info message in the first chunk of a version 2 or 3
/// superblock's extension. `None` when there is none or the driver is another.
fn driver_of(data: &dyn Storage) -> Result<Option<Driver>> {
    Ok(superblock_facts(data)?.and_then(|(driver, _)| driver))
}

/// What the superblock of the file in `data` says of its storage: the driver (as
/// [`driver_of`]) and the end-of-file address. `None` without a superblock.
fn superblock_facts(data: &dyn Storage) -> Result<Option<(Option<Driver>, u64)>> {
    let len = data.len()?;
    let read = |offset: u64, n: usize| -> Result<Vec<u8>> {
        let mut buf = vec![0; n];
        data.read_at_zero_fill(offset, &mut buf)?;
        Ok(buf)
    };
    let Some(at) = superblock::locate(len, |off| read(off, superblock::SIGNATURE.len()))? else {
        return Ok(None);
    };
    let sb = Superblock::decode(&read(at, superblock::MAX_LEN)?, at)?;
    let eof = sb.eof_address;
    let base = if sb.base_address == 0 {
        at
    } else {
        sb.base_address
    };
    let undefined = |a: u64| a == u64::MAX;
    let (id, info, info_at) = if sb.version <= 1 {
        if undefined(sb.driver_info_address) {
            return Ok(Some((None, eof)));
        }
        let address = base.saturating_add(sb.driver_info_address);
        let header = read(address, DriverInfoBlock::HEADER_LEN)?;
        let n = DriverInfoBlock::needed_len(&header, address)?;
        let block = DriverInfoBlock::decode(&read(address, n.min(1 << 20))?, address)?;
        (block.driver_id, block.info, address)
    } else {
        if undefined(sb.extension_address) {
            return Ok(Some((None, eof)));
        }
        let address = base.saturating_add(sb.extension_address);
        let prefix = read(address, 64)?;
        let n = object_header::needed_len(&prefix, address)?;
        let bytes = read(address, n.min(1 << 20))?;
        let chunk = object_header::decode_first_chunk(&bytes, address)?;
        if chunk.messages.iter().any(|m| m.kind == CACHE_IMAGE_MESSAGE) {
            return Ok(Some((Some(Driver::CacheImage), eof)));
        }
        let Some(msg) = chunk
            .messages
            .iter()
            .find(|m| m.kind == h5_format::message::kind::DRIVER_INFO)
        else {
            return Ok(Some((None, eof)));
        };
        let body_at = address.saturating_add(msg.body_offset as u64);
        let mut r = h5_format::reader::Reader::new(msg.body, "driver info message", body_at);
        let d = DriverInfo::decode(&mut r)?;
        (d.driver_id, d.info, body_at)
    };
    let block = DriverInfoBlock {
        driver_id: id,
        info,
    };
    if let Some(size) = block.family_member_size() {
        return Ok(Some((Some(Driver::Family(size)), eof)));
    }
    match block.multi_members(info_at.saturating_sub(DriverInfoBlock::HEADER_LEN as u64)) {
        Some(members) => Ok(Some((Some(Driver::Multi(members?)), eof))),
        None => Ok(Some((None, eof))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_name_members() {
        let p = Pattern::parse(Path::new("dir/fam%05d.h5")).unwrap();
        assert_eq!(p.member(0), Path::new("dir/fam00000.h5"));
        assert_eq!(p.member(12), Path::new("dir/fam00012.h5"));
        let p = Pattern::parse(Path::new("f%d-100%%.h5")).unwrap();
        assert_eq!(p.member(7), Path::new("f7-100%.h5"));
        assert_eq!(Pattern::parse(Path::new("plain.h5")), None);
        assert_eq!(Pattern::parse(Path::new("two%d%d.h5")), None);
        assert_eq!(Pattern::parse(Path::new("str%s.h5")), None);
        let z = Pattern::from_member_zero(Path::new("a/family_file00000.h5")).unwrap();
        assert_eq!(z.member(17), Path::new("a/family_file00017.h5"));
        assert_eq!(Pattern::from_member_zero(Path::new("x00001.h5")), None);
        let z = Pattern::from_member_zero(Path::new("m0.h5")).unwrap();
        assert_eq!(z.member(3), Path::new("m3.h5"));
        assert_eq!(Pattern::from_member_zero(Path::new("plain.h5")), None);
    }

    #[test]
    fn member_templates_fill_and_match() {
        assert_eq!(
            base_name(Path::new("dir/tmulti-s.h5"), "%s-s.h5").as_deref(),
            Some("dir/tmulti")
        );
        assert_eq!(base_name(Path::new("dir/tmulti-s.h5"), "%s-m.h5"), None);
        assert_eq!(
            fill_template("%s-r.h5", "dir/t"),
            Some(PathBuf::from("dir/t-r.h5"))
        );
        assert_eq!(
            fill_template("%s.100%%", "t"),
            Some(PathBuf::from("t.100%"))
        );
        assert_eq!(fill_template("%s-%d.h5", "t"), None);
        assert_eq!(fill_template("plain.h5", "t"), None);
    }
}
