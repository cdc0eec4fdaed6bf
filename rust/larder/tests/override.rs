//! Whether the C names (malloc, free, ...) are larder's: with the `override` feature they are
//! (malloc called directly, and strdup allocating inside libc, are served by larder, as its
//! statistics show); without it they stay the C library's and larder sees none of it.
use std::os::raw::c_void;

extern "C" {
    fn malloc(size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
    fn strdup(s: *const std::os::raw::c_char) -> *mut std::os::raw::c_char;
}

#[cfg(feature = "override")]
#[test]
fn c_malloc_is_larder() {
    let before = larder::stats();
    let mut blocks = Vec::with_capacity(1000);
    for i in 0..1000 {
        let p = unsafe { malloc(1000 + i) };
        assert!(!p.is_null());
        blocks.push(p);
    }
    // strdup allocates inside libc, through the malloc the program defines
    let s = unsafe { strdup(b"larder\0".as_ptr() as *const _) };
    let during = larder::stats();
    assert!(unsafe { larder::usable_size(s as *const u8) } >= 7);
    for p in blocks {
        unsafe { free(p) };
    }
    unsafe { free(s as *mut c_void) };
    assert!(during.bytes_in_use >= before.bytes_in_use + 1000 * 1000,
            "C malloc did not go to larder: bytes_in_use {} -> {}", before.bytes_in_use, during.bytes_in_use);
    assert_eq!(larder::validate(), Ok(()));
}

#[cfg(not(feature = "override"))]
#[test]
fn c_malloc_stays_libc() {
    let before = larder::stats();
    let blocks: Vec<*mut c_void> = (0..64).map(|_| unsafe { malloc(1 << 20) }).collect();
    let during = larder::stats();
    for p in blocks {
        assert!(!p.is_null());
        unsafe { free(p) };
    }
    let s = unsafe { strdup(b"libc\0".as_ptr() as *const _) };
    unsafe { free(s as *mut c_void) };
    // 64 MiB through C's malloc: none of it may show in larder's bytes in use
    assert!(during.bytes_in_use < before.bytes_in_use + (32 << 20),
            "C malloc went to larder without the override feature: bytes_in_use {} -> {}",
            before.bytes_in_use, during.bytes_in_use);
}
