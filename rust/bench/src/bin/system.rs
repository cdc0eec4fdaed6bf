fn main() {
    larder_rust_bench::run("system");
}
