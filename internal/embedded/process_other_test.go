//go:build !unix

package embedded

// The child-process tests need Unix signals and resource limits.
const childEnv = "HTQ_EMBEDDED_CHILD"

func childMain() int { return 2 }
