/* lab_todo.h - how an unfinished part of the lab fails.
 *
 * The skeletons in labs/ are generated from solutions/: every part a student
 * writes is replaced by LAB_TODO("hint"). Reaching one prints where it is and
 * what to do, and ends the process with LAB_TODO_EXIT, so the grader can say
 * "not started" instead of "crashed".
 */
#ifndef LAB_TODO_H
#define LAB_TODO_H

#define LAB_TODO_EXIT 86

#define LAB_TODO(hint) lab_todo(__FILE__, __LINE__, __func__, (hint))

_Noreturn void lab_todo(const char *file, int line, const char *func, const char *hint);

/* Where a test harness wants a record of the TODO (an fd), or -1. The
 * harness's alone: the gate refuses code under test that names it (an
 * address in the harness's data is where a forged record starts). */
extern int lab_todo_record_fd;

#endif
