package main

import (
	"context"
	"errors"
	"io"
)

// runDeployconfig is not built yet.
func runDeployconfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
