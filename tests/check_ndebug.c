/* Fails to build, or fails when run, if asserts were compiled out of tests. */
#include <assert.h>
#include <stdio.h>

int main(void)
{
#ifdef NDEBUG
    fputs("NDEBUG is defined: asserts are compiled out of the tests\n", stderr);
    return 1;
#else
    int ran = 0;
    assert((ran = 1) == 1);
    return ran ? 0 : 1;
#endif
}
