//! The object comment message (type 0x000D): a null-terminated ASCII string.

use crate::error::Result;
use crate::reader::Reader;

/// An object's comment.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Comment {
    /// The comment's bytes (without the terminating null).
    pub text: Vec<u8>,
}

impl Comment {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>) -> Result<Comment> {
        Ok(Comment {
            text: r.cstr()?.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        let c = Comment::decode(&mut Reader::new(b"hello\0\0\0", "t", 0)).unwrap();
        assert_eq!(c.text, b"hello");
        assert!(Comment::decode(&mut Reader::new(b"hello", "t", 0)).is_err());
    }
}
