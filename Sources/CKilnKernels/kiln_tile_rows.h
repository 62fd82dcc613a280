// Dispatch of a microkernel tile on its row count, shared by the ISA files: a tile of `mr` rows
// runs the body built for exactly that many rows (MR, a compile-time constant of the body), so a
// remainder tile costs its rows, not a whole tile's. BODY(R) expands to the body for R rows;
// MAXR is the tile's full height (at most 8); `mr` must be in scope.
#ifndef KILN_TILE_ROWS_H
#define KILN_TILE_ROWS_H

#define KILN_ROWS_AT_MOST(R, MAXR) ((R) < (MAXR) ? (R) : (MAXR))
#define KILN_ROWS_DISPATCH(MAXR, BODY) \
    switch (mr < (MAXR) ? mr : (MAXR)) { \
    case 1: BODY(1); break; \
    case 2: BODY(KILN_ROWS_AT_MOST(2, MAXR)); break; \
    case 3: BODY(KILN_ROWS_AT_MOST(3, MAXR)); break; \
    case 4: BODY(KILN_ROWS_AT_MOST(4, MAXR)); break; \
    case 5: BODY(KILN_ROWS_AT_MOST(5, MAXR)); break; \
    case 6: BODY(KILN_ROWS_AT_MOST(6, MAXR)); break; \
    case 7: BODY(KILN_ROWS_AT_MOST(7, MAXR)); break; \
    default: BODY(MAXR); break; \
    }

#endif
