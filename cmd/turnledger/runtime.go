package main

import (
	"context"
	"errors"
	"io"
)

// runRuntime is not built yet.
func runRuntime(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
