// Writes semver.json, the table semver_test.go checks against: for each
// range, the versions npm itself says satisfy it (npm-pick-manifest reads
// ranges with {loose: true}). Regenerate with npm's own semver package:
//   node testdata/semver-gen.js /usr/lib/node_modules/npm/node_modules/semver > testdata/semver.json
const semver = require(process.argv[2]);
const ranges = [
  "*", "", "x", "X", "1", "1.x", "1.2", "1.2.x", "1.2.3", "=1.2.3", "v1.2.3", "=v1.2.3",
  "^1.2.3", "^0.2.3", "^0.0.3", "^1.2", "^0.0", "^0.x", "^0", "^1.x", "^0.0.x", "^1.2.3-beta.2", "^0.0.3-beta",
  "~1.2.3", "~1.2", "~1", "~0.2.3", "~1.2.3-beta.2", "~>1.2.3", "~ 1.2.3", "^ 1.2.3",
  ">1.2.3", ">=1.2.3", "<1.2.3", "<=1.2.3", ">1.2", ">=1.2", "<1.2", "<=1.2", ">1", "<=1",
  ">= 1.2.3", "> 1.2.3 < 2", ">=1.2.3 <2.0.0", ">=1.2.3, <2", "1.2.3 - 2.3.4", "1.2 - 2.3.4", "1.2.3 - 2.3", "1.2.3 - 2", "1 - 2",
  "1.2.3 || 2.x", "<1.0.0 || >=2.3.1 <2.4.5 || >=2.5.2 <3.0.0", "^1 || ^2 || ^3", "1.x || >=2.5.0 || 5.0.0 - 7.2.3",
  ">1.2.3-alpha.3", ">=1.2.3-alpha.3 <1.2.4", "1.2.3-alpha.3", "<1.2.3-beta", "*-0", ">=0.0.0-0",
  "1.2.3+build", ">=1.2.3+build", "^1.2.3+build",
  "=>1.2.3", "<=>1", "nonsense", "1.2.3.4", "01.2.3", ">", "^", "~", "1 2", "||", "1 ||", ">=1.0.0 <=1.0.0",
  "<0.0.0", "<0.0.0-0", ">=1.2.3 <1.2.3", "latest", "1.2.*", "1.*.3", "x.x.x", "^*", "~*",
];
const versions = [
  "0.0.0", "0.0.1", "0.0.3", "0.0.4", "0.1.0", "0.2.3", "0.2.9", "0.3.0", "1.0.0", "1.0.0-rc.1", "1.1.9", "1.2.0", "1.2.2",
  "1.2.3", "1.2.3-alpha.3", "1.2.3-alpha.7", "1.2.3-beta", "1.2.3-beta.2", "1.2.3-beta.4", "1.2.3+build.5", "1.2.4", "1.2.4-beta.0",
  "1.3.0", "1.9.9", "2.0.0", "2.0.0-0", "2.3.0", "2.3.4", "2.3.5", "2.4.0", "2.4.5", "2.5.2", "2.9.0", "3.0.0", "3.4.5-alpha.9", "3.9.9",
  "5.0.0", "7.2.3", "7.2.4", "10.0.0", "0.0.3-beta", "0.0.3-beta.1",
];
const out = [];
for (const r of ranges) {
  let valid = true;
  try { valid = semver.validRange(r, {loose: true}) !== null; } catch (e) { valid = false; }
  const yes = [];
  if (valid) for (const v of versions) if (semver.satisfies(v, r, {loose: true})) yes.push(v);
  out.push({range: r, valid, satisfied: yes});
}
console.log(JSON.stringify({versions, cases: out}, null, 1));
