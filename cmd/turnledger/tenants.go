package main

import (
	"context"
	"errors"
	"io"
)

// runTenants is not built yet.
func runTenants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
