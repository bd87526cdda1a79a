package main

import (
	"context"
	"errors"
	"io"
)

// runMonitor is not built yet.
func runMonitor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
