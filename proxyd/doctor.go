package proxyd

import (
	"context"
	"fmt"
	"io"
)

func cmdDoctor(ctx context.Context, args []string, common commonFlags, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "doctor: not yet")
	return 1
}
