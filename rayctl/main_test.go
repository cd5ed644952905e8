package rayctl_test

import (
	"os"
	"testing"

	"gridweave.dev/internal/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.RunMain(m)) }
