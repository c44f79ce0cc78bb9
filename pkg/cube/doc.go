// Package cube is the contract every cube of the datapath keeps, so that a
// new cube is one package (plus its BPF headers) and one line in the
// registry (package cubes), and nothing else in the agent changes.
//
// A cube declares the BPF maps it owns (Maps: name, default size, the flag
// that sizes it); the datapath loads the one BPF object, sizes and pins
// those maps, and hands each cube only its own, as a Maps set. Start then
// gives the cube what it needs of the node and returns what the agent runs
// for it: a reconciler of model state (the state source delivers to it),
// metrics, and readiness.
//
// Cubes write their maps through the Map interface, which the datapath
// implements over the kernel's maps and package cubetest over memory, with
// fault injection: cube logic is tested without root or a kernel.
package cube
