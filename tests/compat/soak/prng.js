// The soak's one source of randomness: a seeded PRNG (sfc32, seeded through splitmix32), so
// that a seed replays the same choices. Nothing in the soak calls Math.random.
'use strict';

// splitmix32: spreads a 32-bit seed into well-mixed state words.
function splitmix(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

class Prng {
  /// `seed`: an unsigned 32-bit integer.
  constructor(seed) {
    const mix = splitmix(seed);
    this.a = mix(); this.b = mix(); this.c = mix(); this.d = mix();
    for (let i = 0; i < 12; i++) this.next();
  }

  // sfc32: the next unsigned 32-bit integer.
  next() {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  // A float in [0, 1).
  float() { return this.next() / 4294967296; }

  // An integer in [lo, hi], both included.
  int(lo, hi) { return lo + Math.floor(this.float() * (hi - lo + 1)); }

  // True with probability p.
  chance(p) { return this.float() < p; }

  // One element of a non-empty array.
  pick(items) { return items[Math.floor(this.float() * items.length)]; }

  // A key of `weights` ({name: weight}), chosen in proportion to its weight.
  weighted(weights) {
    const entries = Object.entries(weights).filter(([, w]) => w > 0);
    const total = entries.reduce((s, [, w]) => s + w, 0);
    let x = this.float() * total;
    for (const [name, w] of entries) {
      x -= w;
      if (x < 0) return name;
    }
    return entries[entries.length - 1][0];
  }

  // A few distinct elements of `items` (at most n), in random order.
  sample(items, n) {
    const copy = [...items];
    for (let i = copy.length - 1; i > 0; i--) {
      const j = Math.floor(this.float() * (i + 1));
      [copy[i], copy[j]] = [copy[j], copy[i]];
    }
    return copy.slice(0, n);
  }

  // A child generator for a sub-task, so that its draws do not shift the parent's sequence.
  fork() { return new Prng(this.next()); }
}

module.exports = { Prng };
