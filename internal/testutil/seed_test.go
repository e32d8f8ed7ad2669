package testutil

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSeedDefault(t *testing.T) {
	t.Setenv(SeedEnv, "")
	a := &recorder{TB: t, name: "TestA"}
	b := &recorder{TB: t, name: "TestB"}
	sa, sb := Seed(a), Seed(b)
	assert.Equal(t, sa, Seed(&recorder{TB: t, name: "TestA"}), "default seed differs between runs of the same test")
	assert.NotEqual(t, sa, sb, "two tests got the same default seed")
	require.Len(t, a.logs, 1)
	assert.Contains(t, a.logs[0], fmt.Sprintf("seed=%d ", sa))
	a.finish() // passed: no second message
	assert.Len(t, a.logs, 1, "passing test logged again")
	b.failed = true
	b.finish()
	require.Len(t, b.logs, 2, "failing test logs the seed again")
	assert.Contains(t, b.logs[1], fmt.Sprintf("GOROCE_SEED=%d", sb))
	assert.Contains(t, b.logs[1], "TestB")
}

func TestSeedEnv(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want uint64
	}{{"42", 42}, {"0x2a", 42}, {"18446744073709551615", 1<<64 - 1}} {
		t.Setenv(SeedEnv, tc.env)
		assert.Equal(t, tc.want, Seed(&recorder{TB: t, name: "T"}), "%s=%s", SeedEnv, tc.env)
	}
	t.Setenv(SeedEnv, "random")
	assert.NotEqual(t, Seed(&recorder{TB: t}), Seed(&recorder{TB: t}), "random seeds repeat")
	t.Setenv(SeedEnv, "banana")
	r := &recorder{TB: t}
	Seed(r)
	assert.True(t, r.fatal, "invalid GOROCE_SEED accepted")
}

func TestSubSeed(t *testing.T) {
	assert.NotEqual(t, SubSeed(1, "ab"), SubSeed(1, "ba"))
	assert.NotEqual(t, SubSeed(1, "ab"), SubSeed(2, "ab"))
	assert.Equal(t, SubSeed(1, "ab"), SubSeed(1, "ab"))
}
