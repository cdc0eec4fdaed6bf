#[global_allocator]
static GLOBAL: larder::Larder = larder::Larder;

fn main() {
    larder_rust_bench::run("larder");
}
