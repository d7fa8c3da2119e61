"""The lab's autograder: builds a student tree, runs the grader's tests in
lanes (plain, race, Valgrind, TSan, performance), reads what happened from
the test records, and reports points with a diagnosis for every failure.
pytest drives it: see grader/grade/."""
