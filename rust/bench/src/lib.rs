//! The workload: 4 threads each build a BTreeMap<String, Vec<u8>> of `keys` entries (keys
//! like "key-2-00001234", values of 8 to 520 bytes) and drop it, `rounds` times.
//! Mode `local`: each thread drops its own map. Mode `handoff`: each map is sent to the next
//! thread and dropped there, so every free is by a thread that did not allocate the block.
//! Prints one JSON line: the parameters, the seconds and a checksum.
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

type Map = BTreeMap<String, Vec<u8>>;

fn build(t: usize, round: usize, keys: usize) -> Map {
    let mut m = Map::new();
    let mut x = (t as u64 + 1) * 0x9e37_79b9_7f4a_7c15 ^ round as u64;
    for i in 0..keys {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = 8 + (x % 513) as usize;
        m.insert(format!("key-{}-{:08}", t, (x as usize ^ i) % (keys * 4)), vec![(i & 0xff) as u8; len]);
    }
    m
}

fn checksum(m: &Map) -> u64 {
    m.iter().map(|(k, v)| k.len() as u64 + v.len() as u64).sum()
}

pub fn run(allocator: &str) {
    let args: Vec<String> = std::env::args().collect();
    let get = |name: &str, def: &str| -> String {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
            .unwrap_or_else(|| def.to_string())
    };
    let threads: usize = get("--threads", "4").parse().expect("--threads N");
    let keys: usize = get("--keys", "100000").parse().expect("--keys N");
    let rounds: usize = get("--rounds", "2").parse().expect("--rounds N");
    let mode = get("--mode", "local");
    if mode != "local" && mode != "handoff" {
        eprintln!("--mode local|handoff");
        std::process::exit(2);
    }

    let start = Instant::now();
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..threads {
        let (tx, rx) = mpsc::channel::<Map>();
        senders.push(tx);
        receivers.push(rx);
    }
    let handles: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(t, rx)| {
            let next = senders[(t + 1) % threads].clone();
            let handoff = mode == "handoff";
            thread::spawn(move || {
                let mut sum = 0u64;
                for round in 0..rounds {
                    let m = build(t, round, keys);
                    sum += checksum(&m);
                    if handoff {
                        next.send(m).unwrap();
                        drop(rx.recv().unwrap()); // the previous thread's map, freed here
                    } else {
                        drop(m);
                    }
                }
                sum
            })
        })
        .collect();
    drop(senders);
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"bench\":\"btree\",\"allocator\":\"{}\",\"mode\":\"{}\",\"threads\":{},\"keys\":{},\"rounds\":{},\"seconds\":{:.4},\"checksum\":{}}}",
        allocator, mode, threads, keys, rounds, secs, sum
    );
}
