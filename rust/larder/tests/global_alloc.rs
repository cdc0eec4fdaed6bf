//! A multithreaded program with larder as its global allocator: collections, strings,
//! over-aligned types, realloc growth, and threads that free what other threads allocated.
//! Each test checks through liblarder's own statistics that larder served it.
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

#[global_allocator]
static GLOBAL: larder::Larder = larder::Larder;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn counting() -> bool {
    cfg!(feature = "stats")
}

#[test]
fn collections_and_strings_from_threads() {
    let _serial = serial();
    let before = larder::stats();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            thread::spawn(move || {
                let mut map: HashMap<String, Vec<u32>> = HashMap::new();
                let mut tree: BTreeMap<u64, String> = BTreeMap::new();
                let mut queue: VecDeque<Box<[u8]>> = VecDeque::new();
                for i in 0..20_000u32 {
                    let key = format!("thread-{}-key-{}", t, i % 5000);
                    map.entry(key).or_insert_with(Vec::new).push(i);
                    tree.insert(u64::from(i) * 7 + t, "x".repeat((i % 300) as usize));
                    queue.push_back(vec![t as u8; (i % 2000) as usize + 1].into_boxed_slice());
                    if queue.len() > 500 {
                        queue.pop_front();
                    }
                }
                let total: usize = map.values().map(|v| v.len()).sum();
                assert_eq!(total, 20_000);
                assert_eq!(tree.len(), 20_000);
                assert!(queue.iter().all(|b| b.iter().all(|&x| x == t as u8)));
                // hold it all while the main thread looks at the statistics
                (map, tree, queue)
            })
        })
        .collect();
    let held: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let during = larder::stats();
    let live: usize = held.iter().map(|(m, t, q)| {
        m.len() * 24 + t.values().map(|s| s.len()).sum::<usize>() + q.iter().map(|b| b.len()).sum::<usize>()
    }).sum();
    println!("live at least {} bytes; larder: bytes_in_use {} -> {}, mallocs {} -> {}",
             live, before.bytes_in_use, during.bytes_in_use, before.mallocs, during.mallocs);
    // An absolute bound: frees of earlier tests that larder has not collected yet (remote frees
    // are taken in by their owner later) only make bytes_in_use larger, never smaller.
    assert!(during.bytes_in_use >= live,
            "larder's bytes_in_use {} is below the {} bytes live: larder did not serve them",
            during.bytes_in_use, live);
    // and each block is larder's: its usable size (0 for a pointer larder does not own)
    for (m, t, q) in &held {
        for v in m.values().take(100) {
            assert!(unsafe { larder::usable_size(v.as_ptr() as *const u8) } >= v.len() * 4);
        }
        for s in t.values().filter(|s| !s.is_empty()).take(100) {
            assert!(unsafe { larder::usable_size(s.as_ptr()) } >= s.len());
        }
        for b in q.iter().take(100) {
            assert!(unsafe { larder::usable_size(b.as_ptr()) } >= b.len());
        }
    }
    if counting() {
        assert!(during.mallocs - before.mallocs >= 4 * 3 * 20_000, "mallocs {} -> {}", before.mallocs, during.mallocs);
    }
    drop(held);
    assert_eq!(larder::validate(), Ok(()));
}

#[test]
fn over_aligned_types() {
    #[repr(align(64))]
    struct Line([u8; 64]);
    #[repr(align(4096))]
    struct Page([u8; 100]);
    #[repr(align(65536))]
    struct Huge(u64);

    let _serial = serial();
    let lines: Vec<Box<Line>> = (0..1000).map(|i| Box::new(Line([i as u8; 64]))).collect();
    let pages: Vec<Box<Page>> = (0..100).map(|i| Box::new(Page([i as u8; 100]))).collect();
    let huge: Vec<Box<Huge>> = (0..8).map(|i| Box::new(Huge(i))).collect();
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(&**l as *const Line as usize % 64, 0);
        assert_eq!(l.0[63], i as u8);
        assert!(unsafe { larder::usable_size(&**l as *const Line as *const u8) } >= 64);
    }
    for (i, p) in pages.iter().enumerate() {
        assert_eq!(&**p as *const Page as usize % 4096, 0);
        assert_eq!(p.0[99], i as u8);
    }
    for (i, h) in huge.iter().enumerate() {
        assert_eq!(&**h as *const Huge as usize % 65536, 0);
        assert_eq!(h.0, i as u64);
    }
    // a growing Vec of over-aligned elements goes through the aligned realloc path
    let mut v: Vec<Line> = Vec::new();
    for i in 0..5000 {
        v.push(Line([i as u8; 64]));
        assert_eq!(v.as_ptr() as usize % 64, 0);
    }
    assert!(v.iter().enumerate().all(|(i, l)| l.0[0] == i as u8));
    assert_eq!(larder::validate(), Ok(()));
}

#[test]
fn realloc_growth() {
    let _serial = serial();
    let before = larder::stats();
    let mut v: Vec<u64> = Vec::new();
    for i in 0..2_000_000u64 {
        v.push(i);
    }
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
    let mut s = String::new();
    for i in 0..100_000 {
        s.push_str(&i.to_string());
    }
    assert!(s.starts_with("0123456789101112"));
    let during = larder::stats();
    assert!(during.bytes_in_use >= v.len() * 8,
            "a 16 MB Vec is not in larder's bytes_in_use ({})", during.bytes_in_use);
    assert!(unsafe { larder::usable_size(v.as_ptr() as *const u8) } >= v.len() * 8);
    assert!(unsafe { larder::usable_size(s.as_ptr()) } >= s.len());
    if counting() {
        assert!(during.reallocs > before.reallocs, "no realloc counted");
    }
    v.shrink_to_fit();
    v.truncate(10);
    v.shrink_to_fit();
    assert_eq!(v, (0..10).collect::<Vec<u64>>());
    drop(v);
    drop(s);
    assert_eq!(larder::validate(), Ok(()));
}

#[test]
fn threads_free_what_others_allocated() {
    let _serial = serial();
    let before = larder::stats();
    let (tx, rx) = mpsc::sync_channel::<Vec<Box<[u8]>>>(16);
    let rx = Arc::new(Mutex::new(rx));
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || {
                for round in 0..200 {
                    let batch: Vec<Box<[u8]>> = (0..100)
                        .map(|i| vec![(p + round + i) as u8; 16 + (i * 37) % 3000].into_boxed_slice())
                        .collect();
                    tx.send(batch).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let rx = Arc::clone(&rx);
            thread::spawn(move || {
                let mut freed = 0usize;
                loop {
                    let batch = match rx.lock().unwrap().recv() {
                        Ok(b) => b,
                        Err(_) => break,
                    };
                    freed += batch.len();
                    drop(batch); // freed by a thread that did not allocate it
                }
                freed
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let freed: usize = consumers.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(freed, 2 * 200 * 100);
    let after = larder::stats();
    println!("remote frees {} -> {}", before.remote_frees, after.remote_frees);
    if counting() {
        assert!(after.remote_frees - before.remote_frees >= 1000,
                "larder counted {} remote frees for 40000 cross-thread frees",
                after.remote_frees - before.remote_frees);
    }
    assert_eq!(larder::validate(), Ok(()));
}

#[test]
fn version_and_trim() {
    let _serial = serial();
    assert_eq!(larder::version(), env!("CARGO_PKG_VERSION"));
    let big: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 1 << 20]).collect();
    drop(big);
    larder::trim();
    assert_eq!(larder::validate(), Ok(()));
}
