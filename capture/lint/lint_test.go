package lint_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/lint"
)

// root is the module root, for testdata.
const root = "../.."

// TestRealCapturesAreClean lints every capture of real rdma_rxe traffic
// (testdata/pcaps, recorded with the rxe interop harness): rxe follows every rule, so
// any finding is a false positive of the linter.
func TestRealCapturesAreClean(t *testing.T) {
	m, err := filepath.Glob(filepath.Join(root, "testdata/pcaps/*.pcap"))
	require.NoError(t, err)
	require.NotEmpty(t, m)
	for _, path := range m {
		t.Run(filepath.Base(path), func(t *testing.T) {
			r, err := capture.Open(path)
			require.NoError(t, err)
			defer r.Close()
			fs, res, err := lint.Lint(r)
			require.NoError(t, err)
			require.NotEmpty(t, res.Connections)
			for _, x := range fs {
				t.Errorf("frame %d: %s: %s", x.Frame, x.Rule, x.Message)
			}
			assert.Empty(t, res.Capture.Error)
		})
	}
}
