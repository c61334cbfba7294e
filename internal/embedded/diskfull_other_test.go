//go:build unix && !linux

package embedded

import (
	"context"
	"fmt"
)

// childTmpfs needs Linux's namespaces; TestDiskFullTmpfs runs there only.
func childTmpfs(context.Context, string, string) int {
	fmt.Println("skip no mount namespaces on this system")
	return 0
}
