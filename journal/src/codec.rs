//! The record codec: every stored record value is one format-version byte followed by the
//! postcard encoding of the record.
//!
//! Decoding checks the version byte first and refuses anything but [`FORMAT_VERSION`] with
//! [`CodecError::UnknownFormatVersion`]: a record written by another format is an error, never
//! a guess. It also refuses trailing bytes after the value.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::CodecError;

/// The record format this build writes and reads (the leading byte of every record value, and
/// the value of the journal's `format_version` meta entry).
pub const FORMAT_VERSION: u8 = 1;

/// Encodes `value` as `[FORMAT_VERSION] ++ postcard(value)`.
///
/// Errors: [`CodecError::Encode`] if postcard cannot serialize the value.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    postcard::to_extend(value, vec![FORMAT_VERSION]).map_err(CodecError::Encode)
}

/// Decodes bytes written by [`encode`].
///
/// Errors: [`CodecError::Empty`] for no bytes at all; [`CodecError::UnknownFormatVersion`] when
/// the first byte is not [`FORMAT_VERSION`]; [`CodecError::Decode`] when the rest is not a
/// valid postcard value of `T`; [`CodecError::TrailingBytes`] when bytes remain after it.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    check_version(version)?;
    let (value, rest) = postcard::take_from_bytes(body).map_err(CodecError::Decode)?;
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(CodecError::TrailingBytes { count: rest.len() })
    }
}

/// Accepts exactly [`FORMAT_VERSION`].
///
/// Errors: [`CodecError::UnknownFormatVersion`] with `found = version`.
pub fn check_version(version: u8) -> Result<(), CodecError> {
    if version == FORMAT_VERSION {
        Ok(())
    } else {
        Err(CodecError::UnknownFormatVersion {
            found: version,
            supported: FORMAT_VERSION,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_leading_version_byte() {
        let bytes = encode(&(7u64, String::from("x"))).unwrap();
        assert_eq!(bytes[0], FORMAT_VERSION);
        let back: (u64, String) = decode(&bytes).unwrap();
        assert_eq!(back, (7, String::from("x")));
    }

    #[test]
    fn refuses_unknown_version_empty_and_trailing_bytes() {
        let mut bytes = encode(&5u32).unwrap();
        bytes[0] = 2;
        assert_eq!(
            decode::<u32>(&bytes),
            Err(CodecError::UnknownFormatVersion {
                found: 2,
                supported: FORMAT_VERSION
            })
        );
        assert_eq!(decode::<u32>(&[]), Err(CodecError::Empty));
        let mut bytes = encode(&5u32).unwrap();
        bytes.extend_from_slice(&[0, 0]);
        assert_eq!(
            decode::<u32>(&bytes),
            Err(CodecError::TrailingBytes { count: 2 })
        );
    }
}
