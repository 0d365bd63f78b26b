fn main() {
    std::process::exit(sanddune::cli::main());
}
