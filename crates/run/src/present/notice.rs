//! A message written over a frame on the host: after a kernel's fault the
//! window keeps its last frame, and this says over it what happened and the
//! cure (the page draws the same in HTML). The box is the top of the frame,
//! darkened and reddened so the frame stays recognisable beneath; the text
//! is an 8x8 bitmap font (`font8x8`) at twice its size, wrapped to the
//! frame's width. No GPU: after an illegal address on NVIDIA, graphics
//! pipelines stop finishing, and the CPU path needs none.

use font8x8::legacy::BASIC_LEGACY;

/// Pixels a glyph's dot takes on each side.
const SCALE: usize = 2;
/// A glyph's cell and a line's height, in pixels.
const CELL: usize = 8 * SCALE;
const LINE: usize = CELL + 4;
/// The box's padding.
const PAD: usize = 10;
const WHITE: u32 = 0x00ff_ffff;

/// A host picture's size in pixels (softbuffer's words: rows of `width`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Area {
    /// Pixels a row.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

impl Area {
    /// A window's or frame's size, as host pixels count it.
    pub fn of(extent: ash::vk::Extent2D) -> Self {
        Area { width: extent.width as usize, height: extent.height as usize }
    }

    /// Its pixels.
    pub fn pixels(self) -> usize {
        self.width * self.height
    }
}

/// A pixel's place in a host picture: column and row from the top left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Spot {
    x: usize,
    y: usize,
}

/// Writes `lines` over `pixels`, a frame of `width` × `height` in
/// softbuffer's 0RGB words (rows top to bottom), in a box at its top;
/// characters outside ASCII are written as `?`. Lines wider than the frame
/// wrap; lines past its height are cut.
pub fn write(pixels: &mut [u32], width: usize, height: usize, lines: &[String]) {
    if width == 0 || pixels.len() < width * height {
        return;
    }
    let per_line = (width.saturating_sub(2 * PAD) / CELL).max(1);
    let wrapped: Vec<Vec<char>> = lines
        .iter()
        .flat_map(|l| {
            let chars: Vec<char> = l.chars().map(|c| if c.is_ascii() { c } else { '?' }).collect();
            let rows: Vec<Vec<char>> = chars.chunks(per_line).map(<[char]>::to_vec).collect();
            if rows.is_empty() {
                vec![Vec::new()]
            } else {
                rows
            }
        })
        .collect();
    let bottom = (2 * PAD + wrapped.len() * LINE).min(height);
    for px in &mut pixels[..bottom * width] {
        *px = tint(*px);
    }
    for (row, chars) in wrapped.iter().enumerate() {
        for (col, &c) in chars.iter().enumerate() {
            let at = Spot { x: PAD + col * CELL, y: PAD + row * LINE };
            glyph(pixels, Area { width, height: bottom }, at, c);
        }
    }
}

/// A pixel of the box: a quarter of the frame's, over dark red.
fn tint(px: u32) -> u32 {
    let [_, r, g, b] = px.to_be_bytes();
    let mix = |v: u8, base: u32| base * 3 / 4 + u32::from(v) / 4;
    mix(r, 0x70) << 16 | mix(g, 0) << 8 | mix(b, 0)
}

/// Writes `c`'s dots with their top left at `at`, within `bounds`.
fn glyph(pixels: &mut [u32], bounds: Area, at: Spot, c: char) {
    let rows = BASIC_LEGACY.get(c as usize).copied().unwrap_or([0; 8]);
    for (y, bits) in rows.iter().enumerate() {
        for x in 0..8 {
            if bits >> x & 1 == 0 {
                continue;
            }
            for (dy, dx) in (0..SCALE).flat_map(|dy| (0..SCALE).map(move |dx| (dy, dx))) {
                let (px, py) = (at.x + x * SCALE + dx, at.y + y * SCALE + dy);
                if px < bounds.width && py < bounds.height {
                    pixels[py * bounds.width + px] = WHITE;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_written_in_a_box_over_the_frame_and_the_rest_is_kept() {
        let (w, h) = (200, 120);
        let frame = 0x0020_c040;
        let mut pixels = vec![frame; w * h];
        write(&mut pixels, w, h, &["I".into(), "xx".into()]);
        // Two lines: the box is 2 × 10 + 2 × 20 pixels high.
        let bottom = 2 * PAD + 2 * LINE;
        assert!(pixels[..bottom * w].iter().all(|&p| p == WHITE || p == tint(frame)));
        assert!(pixels[bottom * w..].iter().all(|&p| p == frame));
        // "I" of the font: its dots at twice their size, from the box's padding.
        let dots = |x0: usize, y0: usize| {
            (y0..y0 + CELL)
                .flat_map(|y| (x0..x0 + CELL).map(move |x| (x, y)))
                .filter(|&(x, y)| pixels[y * w + x] == WHITE)
                .count()
        };
        let i_dots: usize = BASIC_LEGACY['I' as usize].iter().map(|r| r.count_ones() as usize).sum();
        assert_eq!(dots(PAD, PAD), i_dots * SCALE * SCALE);
        assert_eq!(dots(PAD + CELL, PAD), 0, "one character on the first line");
        assert!(dots(PAD + CELL, PAD + LINE) > 0, "the second line's second x");
    }

    #[test]
    fn long_lines_wrap_and_what_does_not_fit_is_cut() {
        let (w, h) = (64, 50);
        let mut pixels = vec![0; w * h];
        // 64 pixels hold 2 cells a line: 5 characters are 3 lines, taller than the frame.
        write(&mut pixels, w, h, &["ab\u{b5}de".into()]);
        assert!(pixels.iter().all(|&p| p == WHITE || p == tint(0)));
        assert!(pixels[(h - 1) * w..].iter().any(|&p| p == tint(0)), "the box reaches the bottom");
        // Too small or short a buffer: nothing written, no panic.
        write(&mut pixels, 0, 10, &["x".into()]);
        write(&mut pixels[..10], 64, 50, &["x".into()]);
    }
}
