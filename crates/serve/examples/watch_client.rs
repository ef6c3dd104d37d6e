//! A browser view client for measurements (the browser is not on a GPU
//! server): connects to a view's stream, asks for a canvas, decodes every
//! frame (JPEG with zune-jpeg, or raw), acknowledges it, and after `SECS`
//! seconds (the first second is warm-up) prints one JSON line: frames per
//! second delivered, the median latency from the frame's stamp (the
//! consumer taking it, or the viser path's tensor being ready) to its
//! decode, bytes per frame, and the CPU the server process (`PID`) and this
//! client spent per frame.
//!
//! `RATE`: at most that many frames a second (as the page asks for its
//! display's rate); 0 or none: as fast as it decodes.
//!
//!   watch_client ws://127.0.0.1:PORT/ws WIDTHxHEIGHT SECS [jpeg|raw] [PID] [RATE]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tungstenite::Message;

fn main() {
    if let Err(e) = run() {
        eprintln!("watch_client: {e}");
        std::process::exit(1);
    }
}

/// CPU seconds (user + system) of `pid` from /proc, or of this process.
fn cpu(pid: Option<&str>) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.unwrap_or("self"))).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// A frame's header: its number, stamp (µs), width and height.
fn header(b: &[u8]) -> Result<(u64, u64, u32, u32), String> {
    if b.len() < 32 || &b[0..4] != b"VKF2" {
        return Err("not a frame".into());
    }
    let u64_at = |i: usize| b[i..i + 8].try_into().map(u64::from_le_bytes).map_err(|_| "header");
    let u32_at = |i: usize| b[i..i + 4].try_into().map(u32::from_le_bytes).map_err(|_| "header");
    Ok((u64_at(8)?, u64_at(24)?, u32_at(16)?, u32_at(20)?))
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "watch_client URL WIDTHxHEIGHT SECS [jpeg|raw] [PID|-] [RATE]";
    let (url, canvas, secs) =
        (args.get(1).ok_or(usage)?, args.get(2).ok_or(usage)?, args.get(3).ok_or(usage)?);
    let (w, h) = canvas.split_once('x').ok_or(usage)?;
    let (w, h): (u32, u32) = (w.parse().map_err(|_| usage)?, h.parse().map_err(|_| usage)?);
    let secs: f64 = secs.parse().map_err(|_| usage)?;
    let mode = args.get(4).map_or("jpeg", String::as_str);
    let pid = args.get(5).map(String::as_str).filter(|p| *p != "-");
    let rate: f64 = args.get(6).map_or(Ok(0.0), |r| r.parse()).map_err(|_| usage)?;
    let (mut ws, _) = tungstenite::connect(url.as_str()).map_err(|e| format!("{url}: {e}"))?;
    for m in [
        format!(r#"{{"t":"mode","mode":"{mode}","quality":80}}"#),
        format!(r#"{{"t":"rate","fps":{rate}}}"#),
        format!(r#"{{"t":"canvas","w":{w},"h":{h}}}"#),
    ] {
        ws.send(Message::text(m)).map_err(|e| e.to_string())?;
    }
    let (mut started, mut frames, mut bytes) = (None::<(Instant, f64, f64)>, 0u64, 0u64);
    let mut latencies = Vec::new();
    let first = Instant::now();
    loop {
        let m = match ws.read() {
            Ok(m) => m,
            Err(e) if started.is_some() => {
                eprintln!("watch_client: the stream ended: {e}");
                break;
            }
            Err(e) => return Err(format!("no frame: {e}")),
        };
        let Message::Binary(b) = m else { continue };
        let (frame, stamp, fw, fh) = header(&b)?;
        let pixels = match b[4] {
            1 => zune_jpeg::JpegDecoder::new(zune_jpeg::zune_core::bytestream::ZCursor::new(&b[32..]))
                .decode()
                .map_err(|e| format!("{e:?}"))?,
            _ => b[32..].to_vec(),
        };
        if pixels.len() < (fw * fh * 3) as usize {
            return Err(format!("frame {frame}: {} bytes for {fw}x{fh}", pixels.len()));
        }
        let decoded = now_us();
        ws.send(Message::text(format!(r#"{{"t":"ack","frame":{frame}}}"#))).map_err(|e| e.to_string())?;
        match started {
            None if first.elapsed() > Duration::from_secs(1) => {
                started = Some((Instant::now(), cpu(pid), cpu(None)))
            }
            None => {}
            Some((at, _, _)) => {
                frames += 1;
                bytes += b.len() as u64;
                latencies.push(decoded.saturating_sub(stamp));
                if at.elapsed().as_secs_f64() >= secs {
                    break;
                }
            }
        }
    }
    let (at, server0, client0) = started.ok_or("no frame after the warm-up")?;
    let elapsed = at.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let n = frames.max(1) as f64;
    println!(
        "{{\"canvas\":\"{w}x{h}\",\"mode\":\"{mode}\",\"rate\":{rate},\"frames\":{frames},\"fps\":{:.1},\"latency_median_ms\":{:.2},\"bytes_per_frame\":{:.0},\"server_cpu_ms_per_frame\":{:.2},\"client_cpu_ms_per_frame\":{:.2}}}",
        frames as f64 / elapsed,
        latencies.get(latencies.len() / 2).copied().unwrap_or(0) as f64 / 1000.0,
        bytes as f64 / n,
        (cpu(pid) - server0) * 1000.0 / n,
        (cpu(None) - client0) * 1000.0 / n,
    );
    Ok(())
}
