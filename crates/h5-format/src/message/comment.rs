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

    /// The message body: the text and its terminating null (libhdf5's `H5O__comment_encode`;
    /// the object header pads the message to its alignment).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.text.len().saturating_add(1));
        out.extend_from_slice(&self.text);
        out.push(0);
        out
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

    #[test]
    fn encodes_what_it_decodes() {
        let c = Comment {
            text: b"run 7: calibrated".to_vec(),
        };
        let body = c.encode();
        assert_eq!(body, b"run 7: calibrated\0");
        assert_eq!(Comment::decode(&mut Reader::new(&body, "t", 0)).unwrap(), c);
    }
}
