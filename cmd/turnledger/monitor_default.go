package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turnledger/turnledger/monitor"
)

// monitorConfig reads the configuration file, or makes the built-in one
// when *path is empty (and then names it so in *path, for messages); token is
// the engine's admin token the built-in configuration uses.
func monitorConfig(path *string, engineURL, engineData, projects string, stdout io.Writer) (data []byte, token string, err error) {
	if *path != "" {
		if data, err = os.ReadFile(*path); err != nil {
			return nil, "", fmt.Errorf("read configuration: %w", err)
		}
		return data, "", nil
	}
	token, _ = adminTokenFor("", engineData)
	if data, err = monitor.BuiltinFile(engineURL, strings.Split(projects, ","), token != ""); err != nil {
		return nil, "", err
	}
	*path = "built-in configuration"
	fmt.Fprintf(stdout, "monitor: no --config, watching %s with the built-in configuration\n", engineURL)
	return data, token, nil
}
