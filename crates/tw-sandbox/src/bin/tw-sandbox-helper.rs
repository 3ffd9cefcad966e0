//! The sandbox helper executable: the runtime spawns it for every tool process; it confines
//! itself and then executes the tool (see `tw_sandbox::helper`).

fn main() {
    tw_sandbox::helper::main()
}
