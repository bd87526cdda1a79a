// Package kernel holds the domain of turnledger: its types, commands, events
// and invariants. It imports only the standard library.
package kernel
