/*
 * JSON text of integer and timestamp columns, written as Arrow large-string arrays (offsets and
 * data) for json_rows.c to interleave. Arrow's casts do the same through its general formatters;
 * these loops know the two shapes the query path sends most and write each value once.
 *
 * Every value is formatted, null or not (the caller's validity bitmap hides the nulls), so any
 * int64 must stay within its slot: a garbage value behind a null writes wrong digits, never
 * past its width.
 */
#include <stdint.h>
#include <string.h>

static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Decimal text of each value, back to back in data (at most 20 bytes a value); offsets gets
 * count + 1 entries. Returns the bytes written. */
int64_t arcs_format_int64(const int64_t *values, int64_t count, int64_t *offsets, uint8_t *data) {
    uint8_t *at = data;
    char scratch[20];
    offsets[0] = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t value = values[i];
        /* The magnitude as unsigned: -INT64_MIN does not fit an int64. */
        uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
        if (value < 0) *at++ = '-';
        char *end = scratch + sizeof scratch, *digits = end;
        while (magnitude >= 100) {
            unsigned pair = (unsigned)(magnitude % 100) * 2;
            magnitude /= 100;
            *--digits = DIGIT_PAIRS[pair + 1];
            *--digits = DIGIT_PAIRS[pair];
        }
        if (magnitude >= 10) {
            unsigned pair = (unsigned)magnitude * 2;
            *--digits = DIGIT_PAIRS[pair + 1];
            *--digits = DIGIT_PAIRS[pair];
        } else {
            *--digits = (char)('0' + magnitude);
        }
        memcpy(at, digits, (size_t)(end - digits));
        at += end - digits;
        offsets[i + 1] = at - data;
    }
    return at - data;
}

static inline uint8_t *two_digits(uint8_t *at, unsigned value) {
    value = (value % 100) * 2;
    at[0] = (uint8_t)DIGIT_PAIRS[value];
    at[1] = (uint8_t)DIGIT_PAIRS[value + 1];
    return at + 2;
}

/* Floor division and its non-negative remainder, without overflow for any int64. */
static inline int64_t floor_divide(int64_t value, int64_t divisor, uint64_t *remainder) {
    int64_t quotient = value / divisor, rest = value - quotient * divisor;
    if (rest < 0) {
        rest += divisor;
        quotient -= 1;
    }
    *remainder = (uint64_t)rest;
    return quotient;
}

/* Width of one timestamp's text: YYYY-MM-DDTHH:MM:SS, then a dot and fraction_digits digits. */
int64_t arcs_timestamp_width(int32_t fraction_digits) {
    return 19 + (fraction_digits > 0 ? 1 + fraction_digits : 0);
}

/* The civil date YYYY-MM-DD of a day count since the epoch (proleptic Gregorian), by 400-year
 * eras: see H. Hinnant, "chrono-Compatible Low-Level Date Algorithms". Years outside 0..9999 are
 * written modulo 10,000. */
static void write_date(uint8_t *at, int64_t days) {
    int64_t shifted = days + 719468;
    int64_t era = (shifted >= 0 ? shifted : shifted - 146096) / 146097;
    unsigned day_of_era = (unsigned)(shifted - era * 146097);
    unsigned year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
    unsigned day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    unsigned month_index = (5 * day_of_year + 2) / 153;
    unsigned day = day_of_year - (153 * month_index + 2) / 5 + 1;
    unsigned month = month_index < 10 ? month_index + 3 : month_index - 9;
    int64_t year = (int64_t)year_of_era + era * 400 + (month <= 2);
    uint64_t shown_year = (uint64_t)(year % 10000 + 10000) % 10000;
    at = two_digits(at, (unsigned)(shown_year / 100));
    at = two_digits(at, (unsigned)(shown_year % 100));
    *at++ = '-';
    at = two_digits(at, month);
    *at++ = '-';
    two_digits(at, day);
}

/* One unit's loop; inlined with constant arguments, so its divisions become multiplications.
 * Rows of a time series mostly share their day with the row before: its date is copied then. */
__attribute__((always_inline)) static inline void write_timestamps(const int64_t *values, int64_t count, const int64_t per_second,
                                    const int32_t fraction_digits, uint8_t *data) {
    const int64_t width = arcs_timestamp_width(fraction_digits);
    int64_t last_day = 0;
    uint8_t date[10];
    write_date(date, last_day);
    uint8_t *at = data;
    for (int64_t i = 0; i < count; i++) {
        uint64_t fraction, second_of_day_64; /* non-negative: unsigned divisions are the cheaper */
        int64_t seconds = floor_divide(values[i], per_second, &fraction);
        int64_t day = floor_divide(seconds, 86400, &second_of_day_64);
        uint32_t second_of_day = (uint32_t)second_of_day_64;
        if (day != last_day) {
            write_date(date, day);
            last_day = day;
        }
        memcpy(at, date, sizeof date);
        at[10] = 'T';
        two_digits(at + 11, second_of_day / 3600);
        at[13] = ':';
        two_digits(at + 14, second_of_day / 60 % 60);
        at[16] = ':';
        two_digits(at + 17, second_of_day % 60);
        if (fraction_digits > 0) {
            at[19] = '.';
            int32_t d = 20 + fraction_digits; /* just past the last digit */
            for (; d - 2 >= 20; d -= 2) {
                two_digits(at + d - 2, (unsigned)(fraction % 100));
                fraction /= 100;
            }
            if (d > 20) at[20] = (uint8_t)('0' + fraction);
        }
        at += width;
    }
}

/* RFC 3339 text without its zone (the caller writes the Z) of timestamps counted in units of
 * 10^-fraction_digits seconds since the epoch (0, 3, 6 or 9 digits), all of the same width, for
 * years 0 to 9999 (the caller checks the range). offsets gets count + 1 entries; returns the
 * bytes written (count * width), or -1 for a fraction_digits it does not know. */
int64_t arcs_format_timestamps(const int64_t *values, int64_t count, int32_t fraction_digits, int64_t *offsets,
                               uint8_t *data) {
    switch (fraction_digits) {
        case 0: write_timestamps(values, count, 1, 0, data); break;
        case 3: write_timestamps(values, count, 1000, 3, data); break;
        case 6: write_timestamps(values, count, 1000000, 6, data); break;
        case 9: write_timestamps(values, count, 1000000000, 9, data); break;
        default: return -1;
    }
    const int64_t width = arcs_timestamp_width(fraction_digits);
    for (int64_t i = 0; i <= count; i++) offsets[i] = i * width;
    return count * width;
}
