//! What an array handed to `show` is, and its pixels in the shared frames'
//! format. Pure: no Python, no GPU (the unit tests below run anywhere).
//!
//! Accepted: dtypes uint8, float16 and float32; shapes HxW, HxWx1, HxWx3,
//! HxWx4, or CxHxW with `channels_first`; any strides (in bytes, even
//! negative ones), so views such as `a[::2, ::2]` or a transposed array are
//! read where they lie. Grey becomes (v, v, v, opaque), RGB gets an opaque
//! alpha; uint8 frames are RGBA8, float16 RGBA16F, float32 RGBA32F.

use std::fmt;

use vkcuda::Format;

/// An element type `show` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// uint8: 0..255 per channel.
    U8,
    /// float16.
    F16,
    /// float32.
    F32,
}

impl Dtype {
    /// From a NumPy type string (`__array_interface__`'s `typestr`, e.g. `|u1`, `<f4`).
    pub fn from_typestr(typestr: &str) -> Result<Self, String> {
        let little = !typestr.starts_with('>') || typestr.ends_with('1');
        match (&typestr.get(1..).unwrap_or(""), little) {
            (&"u1", _) => Ok(Dtype::U8),
            (&"f2", true) => Ok(Dtype::F16),
            (&"f4", true) => Ok(Dtype::F32),
            _ => Err(format!("dtype {} is not accepted: use uint8, float16 or float32", readable(typestr))),
        }
    }

    /// From a dtype's name as NumPy and the frame functions spell it
    /// ("uint8", "float16", "float32"), or a NumPy type string.
    pub fn from_name(name: &str) -> Result<Self, String> {
        Self::from_typestr(match name {
            "uint8" => "|u1",
            "float16" => "<f2",
            "float32" => "<f4",
            other => other,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::F16 => 2,
            Dtype::F32 => 4,
        }
    }

    /// The shared frames' format for this element type.
    pub fn format(self) -> Format {
        match self {
            Dtype::U8 => Format::Rgba8,
            Dtype::F16 => Format::Rgba16f,
            Dtype::F32 => Format::Rgba32f,
        }
    }

    /// An opaque alpha as this type's bits, in a `u32` (what the packing kernel takes).
    pub fn opaque_bits(self) -> u32 {
        let bytes = self.opaque();
        let mut word = [0u8; 4];
        word[..bytes.len()].copy_from_slice(bytes);
        u32::from_le_bytes(word)
    }

    /// An opaque alpha, as this type's bytes.
    fn opaque(self) -> &'static [u8] {
        match self {
            Dtype::U8 => &[255],
            Dtype::F16 => &[0x00, 0x3c],
            Dtype::F32 => &[0x00, 0x00, 0x80, 0x3f],
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dtype::U8 => "uint8",
            Dtype::F16 => "float16",
            Dtype::F32 => "float32",
        })
    }
}

/// A NumPy type string as people know it (`<i8` → int64).
fn readable(typestr: &str) -> String {
    let (kind, size) = typestr.get(1..).map(|t| t.split_at(1.min(t.len()))).unwrap_or(("", ""));
    let bits = size.parse::<u32>().map(|b| b * 8).unwrap_or(0);
    match kind {
        "u" => format!("uint{bits}"),
        "i" => format!("int{bits}"),
        "f" => format!("float{bits}"),
        "b" => "bool".into(),
        "c" => format!("complex{bits}"),
        _ => typestr.into(),
    }
}

/// An image's layout in memory: where element (y, x, c) is, in bytes from
/// the first element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Element type.
    pub dtype: Dtype,
    /// Rows, columns, channels (1, 3 or 4).
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Channels: 1, 3 or 4.
    pub channels: usize,
    /// Byte steps along y, x and c.
    pub strides: [isize; 3],
}

impl Layout {
    /// The layout of an array of `shape` and byte `strides` (`None`: C order).
    pub fn new(
        dtype: Dtype,
        shape: &[usize],
        strides: Option<&[isize]>,
        channels_first: bool,
    ) -> Result<Self, String> {
        let size = dtype.size() as isize;
        let c_order: Vec<isize> = {
            let mut s = vec![size; shape.len()];
            for i in (0..shape.len().saturating_sub(1)).rev() {
                s[i] = s[i + 1] * shape[i + 1] as isize;
            }
            s
        };
        let strides = strides.unwrap_or(&c_order);
        if strides.len() != shape.len() {
            return Err(format!("{} strides for {} dimensions", strides.len(), shape.len()));
        }
        let (dims, steps): ([usize; 3], [isize; 3]) = match (shape, channels_first) {
            ([h, w], _) => ([*h, *w, 1], [strides[0], strides[1], 0]),
            ([h, w, c], false) => ([*h, *w, *c], [strides[0], strides[1], strides[2]]),
            ([c, h, w], true) => ([*h, *w, *c], [strides[1], strides[2], strides[0]]),
            _ => return Err(shape_error(shape, channels_first)),
        };
        let [height, width, channels] = dims;
        if ![1, 3, 4].contains(&channels) {
            return Err(shape_error(shape, channels_first));
        }
        if height == 0 || width == 0 {
            return Err(format!("shape {shape:?} has no pixels"));
        }
        Ok(Self { dtype, height, width, channels, strides: steps })
    }

    /// The shared frames' format.
    pub fn format(&self) -> Format {
        self.dtype.format()
    }

    /// Bytes of the frame in [`Layout::format`], rows packed.
    pub fn frame_bytes(&self) -> usize {
        self.width * self.height * 4 * self.dtype.size()
    }

    /// The bytes any element has, as offsets from the first element: the
    /// span of memory a reader touches.
    #[cfg(test)]
    pub fn span(&self) -> std::ops::Range<isize> {
        let last = [self.height, self.width, self.channels];
        let (mut low, mut high) = (0, 0);
        for (n, step) in last.iter().zip(self.strides) {
            let far = (*n as isize - 1) * step;
            low += far.min(0);
            high += far.max(0);
        }
        low..high + self.dtype.size() as isize
    }

    /// Converts the image that starts at `first` into RGBA pixels of
    /// [`Layout::format`], rows packed, into `out` ([`Layout::frame_bytes`] long).
    ///
    /// # Safety
    /// Every byte in `Layout::span` around `first` is readable, and nobody
    /// writes it during the call.
    pub unsafe fn convert(&self, first: *const u8, out: &mut [u8]) {
        let size = self.dtype.size();
        let pixel = 4 * size;
        let opaque = self.dtype.opaque();
        let [sy, sx, sc] = self.strides;
        for (y, row) in out.chunks_exact_mut(self.width * pixel).enumerate().take(self.height) {
            for (x, px) in row.chunks_exact_mut(pixel).enumerate() {
                let at = y as isize * sy + x as isize * sx;
                for c in 0..4 {
                    let source = match self.channels {
                        1 if c < 3 => Some(0),
                        3 if c < 3 => Some(c),
                        4 => Some(c),
                        _ => None,
                    };
                    let dst = &mut px[c * size..(c + 1) * size];
                    match source {
                        Some(sc_index) => {
                            let offset = at + sc_index as isize * sc;
                            // SAFETY: (y, x, c) is an element of the image, within its span (the caller's contract).
                            let at = unsafe { first.offset(offset) };
                            // SAFETY: as above: `size` bytes of that element.
                            let src = unsafe { std::slice::from_raw_parts(at, size) };
                            dst.copy_from_slice(src);
                        }
                        None => dst.copy_from_slice(opaque),
                    }
                }
            }
        }
    }
}

fn shape_error(shape: &[usize], channels_first: bool) -> String {
    let order = if channels_first { "CxHxW (channels_first=True)" } else { "HxW, HxWx1, HxWx3 or HxWx4" };
    format!("shape {shape:?} is not accepted: use {order} with 1, 3 or 4 channels")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(layout: &Layout, data: &[u8]) -> Vec<u8> {
        let mut out = vec![0; layout.frame_bytes()];
        let std::ops::Range { start: low, end: high } = layout.span();
        assert!(low == 0 && high as usize <= data.len(), "span {low}..{high} of {}", data.len());
        // SAFETY: the span is inside `data`, checked above.
        unsafe { layout.convert(data.as_ptr(), &mut out) };
        out
    }

    #[test]
    fn opaque_alphas_as_bits() {
        assert_eq!(Dtype::U8.opaque_bits(), 255);
        assert_eq!(Dtype::F16.opaque_bits(), 0x3c00);
        assert_eq!(Dtype::F32.opaque_bits(), 1.0f32.to_bits());
    }

    #[test]
    fn dtypes_from_numpy_type_strings() {
        assert_eq!(Dtype::from_typestr("|u1"), Ok(Dtype::U8));
        assert_eq!(Dtype::from_typestr("<f2"), Ok(Dtype::F16));
        assert_eq!(Dtype::from_typestr("<f4"), Ok(Dtype::F32));
        let e = Dtype::from_typestr("<i8").unwrap_err();
        assert!(e.contains("int64") && e.contains("uint8, float16 or float32"), "{e}");
        assert!(Dtype::from_typestr(">f4").is_err(), "big-endian floats");
        assert_eq!(Dtype::from_name("float16"), Ok(Dtype::F16));
        assert!(Dtype::from_name("int16").unwrap_err().contains("int16"));
    }

    #[test]
    fn grey_rgb_and_rgba_become_rgba() {
        let grey = Layout::new(Dtype::U8, &[1, 2], None, false).unwrap();
        assert_eq!(convert(&grey, &[7, 9]), [7, 7, 7, 255, 9, 9, 9, 255]);
        let rgb = Layout::new(Dtype::U8, &[1, 1, 3], None, false).unwrap();
        assert_eq!(convert(&rgb, &[1, 2, 3]), [1, 2, 3, 255]);
        let rgba = Layout::new(Dtype::U8, &[1, 1, 4], None, false).unwrap();
        assert_eq!(convert(&rgba, &[1, 2, 3, 4]), [1, 2, 3, 4]);
        let f = Layout::new(Dtype::F32, &[1, 1], None, false).unwrap();
        let half = 0.5f32.to_le_bytes();
        let one = 1.0f32.to_le_bytes();
        assert_eq!(convert(&f, &half), [half, half, half, one].concat());
    }

    #[test]
    fn strides_are_followed() {
        // A 2x2 view every other element of a 4x4 uint8 array (a[::2, ::2]).
        let data: Vec<u8> = (0..16).collect();
        let view = Layout::new(Dtype::U8, &[2, 2], Some(&[8, 2]), false).unwrap();
        let out = convert(&view, &data);
        let picked: Vec<u8> = out.chunks(4).map(|p| p[0]).collect();
        assert_eq!(picked, [0, 2, 8, 10]);
        // Channels first: 3x1x2 planes.
        let planes = Layout::new(Dtype::U8, &[3, 1, 2], None, true).unwrap();
        assert_eq!(convert(&planes, &[1, 2, 3, 4, 5, 6]), [1, 3, 5, 255, 2, 4, 6, 255]);
    }

    #[test]
    fn negative_strides_span_backwards() {
        let flipped = Layout::new(Dtype::U8, &[2, 1], Some(&[-1, 1]), false).unwrap();
        assert_eq!(flipped.span(), -1..1);
    }

    #[test]
    fn bad_shapes_say_what_is_accepted() {
        let e = Layout::new(Dtype::U8, &[4, 4, 2], None, false).unwrap_err();
        assert!(e.contains("[4, 4, 2]") && e.contains("HxWx3"), "{e}");
        let e = Layout::new(Dtype::U8, &[4], None, false).unwrap_err();
        assert!(e.contains("[4]"), "{e}");
        assert!(Layout::new(Dtype::U8, &[0, 4], None, false).is_err());
        let e = Layout::new(Dtype::U8, &[5, 4, 4], None, true).unwrap_err();
        assert!(e.contains("CxHxW"), "{e}");
    }
}
