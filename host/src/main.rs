fn main() {
    sanddune::run::timings::mark_process_start();
    std::process::exit(sanddune::cli::main());
}
