package main

import (
	"context"
	"errors"
	"io"
)

// runCatalogue is not built yet.
func runCatalogue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented yet")
}
