// Long runs are behind a flag: `npm run soak` (FERMATA_SOAK=1) scales tests up; `npm test`
// keeps the default sizes that fit the CI budget.
export const soak = process.env.FERMATA_SOAK === '1';
