// Package cpuprof starts a CPU profile of the process into a file, for the
// commands that offer one (bench, replay).
package cpuprof

import (
	"os"
	"runtime/pprof"
)

// Start writes a CPU profile of the process to path until stop is called.
func Start(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
